"""ETMv4 instruction trace packets: the packet vocabulary and the shared packet record it needs
(64-bit addresses, format-6 atom packets of 24 atoms); byte sequences of IHI 0064, chapter 6,
decoded one by one; every ETMv4 snapshot's sources against the reference decoder's packet
listing; any bytes decoded without a crash into packets that tile them, in chunks of any size;
real buffers corrupted; and `cputrace etm packets`."""

from __future__ import annotations

import configparser
import functools
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from opencsd_reference import Packet as ListedPacket
from opencsd_reference import read_packets
from packet_checks import check_fed_in_pieces, check_tiling
from paths import shared

from cputrace.cli import cli
from cputrace.coresight import events
from cputrace.coresight import packets as coresight_packets
from cputrace.coresight.listing import FIELDS
from cputrace.coresight.packets import PACKET, Packets
from cputrace.coresight.snapshot import Device, read_device, read_snapshot
from cputrace.errors import CputraceError
from cputrace.formats.coresight.capture import EtmSource, open_captures, source_packets
from cputrace.formats.etmv4.config import Etmv4Config
from cputrace.formats.etmv4.listing import atom_text, packet_fields
from cputrace.formats.etmv4.packets import PacketDecoder, decode_packets
from cputrace.formats.etmv4.protocol import (
    ERROR_TEXT,
    EXPECTED,
    KIND_NAMES,
    MAX_ATOMS,
    ErrorReason,
    Flag,
    Kind,
    exception_name,
)
from cputrace.formats.ptm.protocol import KIND_NAMES as PTM_KIND_NAMES
from cputrace.model import Isa


def test_codes_the_events_layer_reads_mean_the_same_in_etmv4() -> None:
    """`coresight.events.common_event` reads these codes for every protocol: an ETMv4 kind with
    one of them must be the packet it means there, and the codes of packets ETMv4 lacks must
    name no ETMv4 kind (a commit read as a trigger would make false events)."""
    assert events.K_TIMESTAMP == Kind.TIMESTAMP and events.K_EXCEPTION_RETURN == Kind.EXCEPTION_RETURN
    for code in (
        coresight_packets.K_I_SYNC,
        coresight_packets.K_TRIGGER,
        coresight_packets.K_CONTEXT_ID,
        coresight_packets.K_VMID,
    ):
        assert KIND_NAMES[code] == ""
    for code, name in enumerate(KIND_NAMES):
        if name and code < len(PTM_KIND_NAMES) and PTM_KIND_NAMES[code] in ("unsynced", "error", "a_sync"):
            assert name == PTM_KIND_NAMES[code]
    assert [KIND_NAMES[k] for k in Kind] == [k.name.lower() for k in Kind]


def test_every_error_reason_has_its_texts() -> None:
    assert set(ERROR_TEXT) == set(EXPECTED) == set(ErrorReason)


def test_exception_names_by_profile() -> None:
    """A/R profile types are 4 bits; the M profile's are exception numbers, with IRQ0-7 at
    0x10-0x17 and IRQ8 up at 0x208 up (IHI 0064, tables 6-17 and 6-18)."""
    assert exception_name(0x2, m_profile=False) == "Call"
    assert exception_name(0xE, m_profile=False) == "IRQ"
    assert exception_name(0x5, m_profile=False) == "reserved5"
    assert exception_name(0x3, m_profile=True) == "HardFault"
    assert exception_name(0x13, m_profile=True) == "IRQ3"
    assert exception_name(0x20A, m_profile=True) == "IRQ10"


def test_packet_record_holds_64_bit_addresses_and_24_atoms() -> None:
    """An AArch64 kernel address and a format-6 atom packet's 24 atoms survive the record and the
    batch concatenation (which copies records as opaque bytes)."""
    table = np.zeros(2, PACKET)
    table["address"][0] = 0xFFFFFFC000081000
    table["atoms"][1] = (1 << MAX_ATOMS) - 1
    table["value2"][1] = 0xFFFFFFFF
    stream = np.zeros(4, np.uint8)
    joined = Packets.concatenate([Packets(table[:1], stream[:2], 0), Packets(table[1:], stream[2:], 2)])
    assert int(joined["address"][0]) == 0xFFFFFFC000081000
    assert int(joined["atoms"][1]) == 0xFFFFFF
    assert int(joined["value2"][1]) == 0xFFFFFFFF


# --- packets from the spec's encodings (IHI 0064, chapter 6) ------------------------------------

A_SYNC = bytes(11) + b"\x80"
TRACE_INFO = b"\x01\x00"  # no sections: every field 0
JUNO = {"trcconfigr": 0xC1, "trcidr0": 0x28000EA1, "trcidr1": 0x4100F403, "trcidr2": 0x488}
"""Juno's Cortex-A57 ETMv4.0 (juno_r1_1): context ID and VMID traced, 32-bit context IDs, 8-bit
VMIDs, 64-bit addresses, cycle counts without commits (COMMOPT 1)."""


def config(core: str = "Cortex-A57", **registers: int) -> Etmv4Config:
    return Etmv4Config(**{**JUNO, **registers}, core=core)


def packets_of(data: bytes, cfg: Etmv4Config | None = None) -> Packets:
    return decode_packets(A_SYNC + TRACE_INFO + data, cfg or config())


def kinds(packets: Packets) -> list[str]:
    return [KIND_NAMES[k] for k in packets["kind"]]


def atoms(packets: Packets, i: int) -> str:
    return atom_text(int(packets["atoms"][i]), int(packets["count"][i]))


def test_atoms_of_every_format() -> None:
    """Formats 1-3 give their atoms in the low bits (bit 0 the oldest), 4 and 5 one of four
    patterns, 6 three to 23 E atoms and a last E or N: 0xD4 is 24 E atoms (6.4.20-6.4.25)."""
    p = packets_of(bytes([0xF7, 0xF6, 0xD9, 0xFD, 0xDC, 0xDF, 0xD5, 0xF5, 0xD4, 0xE0, 0xC0]))
    assert kinds(p)[2:] == ["atom"] * 11
    assert [atoms(p, i) for i in range(2, 13)] == [
        "E", "N", "EN", "ENE", "NEEE", "ENEN", "NNNNN", "NEEEE", "E" * 24, "EEEN", "EEEE",
    ]  # fmt: skip
    assert p["info"][2:].tolist() == [1, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6]


def test_addresses_and_the_address_history() -> None:
    """A long 64-bit address sets every bit; a short one (IS0: bits 8:2, and with bit 7 set a
    second byte of 8 more) and a 32-bit long one in AArch64 state replace the low bits of the
    newest address; an exact match repeats the entry it names, which becomes the newest."""
    context = bytes([0x81, 0x31])  # EL1, AArch64, non-secure; no VMID, no context ID
    long64 = bytes([0x9D, 0x23, 0x0F, 0x78, 0x00, 0xC0, 0xFF, 0xFF, 0xFF])  # 0xFFFFFFC000781E8C
    short = bytes([0x95, 0x59])  # bits 8:2 = 0x59
    short2 = bytes([0x95, 0xF7, 0x09])  # bits 8:2 = 0x77, bits 16:9 = 0x09
    long32 = bytes([0x9A, 0x20, 0x19, 0x08, 0x00])  # 0x00083280
    match = bytes([0x92])  # two addresses back
    p = packets_of(context + long64 + short + short2 + long32 + match)
    assert kinds(p)[2:] == ["context", "address_long", "address_short", "address_short", "address_long",
                            "address_match"]  # fmt: skip
    addresses = [int(a) for a in p["address"][3:]]
    assert addresses == [0xFFFFFFC000781E8C, 0xFFFFFFC000781F64, 0xFFFFFFC0007813DC, 0xFFFFFFC000083280,
                         0xFFFFFFC000781F64]  # fmt: skip
    assert p["bits"][3:7].tolist() == [64, 9, 17, 32] and p["info"][7] == 2
    assert set(p["isa"][3:].tolist()) == {Isa.A64}
    assert not any(p["flags"][3:] & Flag.PARTIAL_ADDRESS)


def test_instruction_sets_and_partial_addresses() -> None:
    """IS1 is T32; IS0 is A64 or A32 as the last context says (unknown before one). A trace
    info packet resets the address history to zero, so a short address after it is complete;
    one after an A-sync without a trace info has unknown upper bits (PARTIAL_ADDRESS)."""
    p = packets_of(bytes([0x96, 0x81, 0x9A]) + bytes([0x81, 0x00]) + bytes([0x95, 0x01]))
    assert kinds(p)[2:] == ["address_short", "context", "address_short"]
    assert int(p["address"][2]) == 0x9A02 and p["isa"][2] == Isa.T32 and p["bits"][2] == 16
    assert p["flags"][2] & Flag.IS1 and not p["flags"][2] & Flag.PARTIAL_ADDRESS
    assert p["isa"][4] == Isa.A32  # the context said AArch32
    moved = packets_of(bytes([0x9D, 0, 0, 0, 0, 0, 0, 0, 0x80]) + TRACE_INFO + bytes([0x95, 0x01]))
    assert int(moved["address"][4]) == 0x4  # not 0x8000000000000004: trace info reset the history
    unsynced = decode_packets(A_SYNC + bytes([0x96, 0x81, 0x9A]), config())
    assert unsynced["flags"][1] & Flag.PARTIAL_ADDRESS


def test_address_with_context_32_bit_is1() -> None:
    """Address and context, 32-bit IS1 (0x83): bits 7:1, 15:8, 23:16, 31:24, then the context
    information byte (AArch32, EL0, secure), as armv8_1m_branches starts."""
    p = packets_of(bytes([0x83, 0x01, 0x9A, 0x4F, 0x00, 0x00]), config("Cortex-M55"))
    assert kinds(p)[2:] == ["address_context"]
    assert int(p["address"][2]) == 0x004F9A02 and p["isa"][2] == Isa.T32 and p["bits"][2] == 32
    assert p["info"][2] == 0 and not p["flags"][2] & (Flag.NS | Flag.AARCH64)


def test_context_with_vmid_and_context_id() -> None:
    """A context packet's information byte says whether a VMID (bit 6, TRCIDR2.VMIDSIZE bytes)
    and a context ID (bit 7, TRCIDR2.CIDSIZE bytes) follow, the VMID first; 0x80 is the same
    context again."""
    p = packets_of(bytes([0x81, 0xF2, 0x2A, 0x78, 0x56, 0x34, 0x12, 0x80]))
    assert kinds(p)[2:] == ["context", "context"]
    assert p["info"][2] == 2 and int(p["value"][2]) == 0x12345678 and int(p["value2"][2]) == 0x2A
    assert p["flags"][2] & (Flag.NS | Flag.AARCH64 | Flag.CONTEXT_ID | Flag.VMID) == (
        Flag.NS | Flag.AARCH64 | Flag.CONTEXT_ID | Flag.VMID
    )
    assert p["flags"][3] & Flag.CONTEXT_SAME and int(p["value"][3]) == 0x12345678  # the context as it is


def test_trace_info_timestamp_exception_and_single_byte_packets() -> None:
    info = bytes([0x01, 0x0F, 0x01, 0x85, 0x01, 0x03, 0x40])  # INFO 1, KEY 0x85, SPEC 3, CYCT 0x40
    timestamp = bytes([0x03, 0xC0, 0xA1, 0x05, 0x07])  # 0x150C0 (21 bits), then cycle count 7
    exception = bytes([0x06, 0x9C, 0x21])  # two bytes of type: 0x0E | 1 << 5, fault pending
    p = packets_of(info + timestamp + exception + bytes([0x04, 0x07, 0x70, 0x73]), config(trcidr1=0x4100F443))
    assert kinds(p)[2:] == ["trace_info", "timestamp", "exception", "trace_on", "exception_return", "ignore",
                            "event"]  # fmt: skip
    assert (p["info"][2], p["value"][2], p["value2"][2], p["cycles"][2]) == (1, 0x85, 3, 0x40)
    assert (int(p["value"][3]), p["bits"][3], p["cycles"][3]) == (0x150C0, 21, 7)
    assert p["exception"][4] == 0x2E and p["flags"][4] & Flag.FAULT_PENDING and p["info"][4] == 0
    assert p["value"][8] == 3


def test_speculation_and_cycle_count_packets() -> None:
    """Commit, cancel formats 1-3, mispredict; cycle counts with commits (COMMOPT 0): format 1
    commit then count, format 2 commit+1 and count, format 3 both in the header; counts add the
    trace info's threshold."""
    cfg = config(trcidr0=0x08000EA1, trcidr8=20, trcconfigr=0xD1)
    info = bytes([0x01, 0x08, 0x10])  # CYCT 16
    data = info + bytes([0x2D, 0x85, 0x01, 0x2F, 0x02, 0x32, 0x35, 0x3B, 0x0E, 0x03, 0x09, 0x0D, 0x35, 0x16])
    p = packets_of(data, cfg)
    assert kinds(p)[3:] == ["commit", "cancel", "mispredict", "cancel", "cancel"] + ["cycle_count"] * 3
    assert int(p["value"][3]) == 0x85 and int(p["value"][4]) == 2 and p["flags"][4] & Flag.MISPREDICT
    assert atoms(p, 5) == "EE" and (atoms(p, 6), int(p["value"][6])) == ("E", 1)
    assert (atoms(p, 7), int(p["value"][7]), p["info"][7]) == ("E", 3, 3)
    assert (int(p["value"][8]), p["cycles"][8]) == (3, 16 + 9)  # format 1
    assert (int(p["value"][9]), p["cycles"][9]) == (3 + 20 - 15, 16 + 5)  # format 2, F set
    assert (int(p["value"][10]), p["cycles"][10]) == (2, 16 + 2)  # format 3


def test_q_packets() -> None:
    """Q: a count of instructions, with an exact-match entry, a short or long address, or
    none; type 0xF gives no count (TRCIDR0.QSUPP and TRCCONFIGR.QE on)."""
    cfg = config(trcidr0=0x28000EA1 | 1 << 15, trcconfigr=0xC1 | 1 << 13)
    long64 = bytes([0x9D, 0x00, 0x00, 0x02, 0, 0, 0, 0, 0])  # 0x20000
    p = packets_of(long64 + bytes([0xA0, 0x05, 0xA5, 0x04, 0x07, 0xAC, 0x81, 0x01, 0xAF]), cfg)
    assert kinds(p)[3:] == ["q"] * 4
    assert (int(p["address"][3]), int(p["value"][3]), p["info"][3]) == (0x20000, 5, 0)
    assert (int(p["address"][4]), int(p["value"][4])) == (0x20010, 7)
    assert int(p["value"][5]) == 0x81 and not p["flags"][5] & Flag.Q_ADDRESS
    assert p["flags"][6] & Flag.UNKNOWN_COUNT


def test_conditional_and_data_sync_packets_when_configured() -> None:
    cond = config(trcidr0=0x28000EA1 | 1 << 6, trcconfigr=0xC1 | 1 << 8 | 1 << 16)
    data = bytes(
        [0x6C, 0x85, 0x01, 0x6D, 0x05, 0x41, 0x43, 0x45, 0x4D, 0x5A, 0x34, 0x68, 0x92, 0x01, 0x03, 0x22, 0x2A]
    )
    p = packets_of(data, cond)
    conditional = ["cond_instr"] * 3 + ["cond_flush"] + ["cond_result"] * 4
    assert kinds(p)[2:] == [*conditional, "numbered_data_sync", "unnumbered_data_sync"]
    assert int(p["value"][2]) == 0x85 and (int(p["value"][3]), p["flags"][3] & Flag.COND_FINAL) == (
        3,
        Flag.COND_FINAL,
    )
    assert (p["info"][6], int(p["value"][6])) == (4, 1)
    assert (p["info"][7], int(p["value"][7]), p["count"][7]) == (2, 1, 2)
    assert (p["info"][8], int(p["value"][8])) == (3, 0xA34)
    assert (p["info"][9], int(p["value"][9]), int(p["value2"][9]), int(p["atoms"][9])) == (1, 0x9, 0, 0x32)
    assert (int(p["value"][10]), int(p["value"][11])) == (2, 2)
    unconfigured = packets_of(data[:2])  # the same header where conditional trace is off
    assert kinds(unconfigured)[2] == "error" and unconfigured["info"][2] == ErrorReason.NOT_CONFIGURED


def test_errors_and_resynchronisation() -> None:
    """A reserved header, a reserved extension, a field that runs on and a truncated packet are
    errors naming their bytes; nothing but unsynchronised bytes follows until an A-sync."""
    for bad, reason in ((b"\x08", ErrorReason.RESERVED_HEADER), (b"\x00\x07", ErrorReason.BAD_EXTENSION),
                        (b"\x2d\x80\x80\x80\x80\x80\x01", ErrorReason.FIELD_TOO_LONG),
                        (b"\x00\x00\x00\x7f", ErrorReason.BAD_A_SYNC),
                        (b"\x00\x03\x00\x05\xa3", ErrorReason.RESERVED_HEADER)):  # fmt: skip
        p = packets_of(bad + b"\xf7\xf7" + A_SYNC + b"\xf7")
        names = kinds(p)
        first = names.index("error")
        assert p["info"][first] == reason
        assert names[first + 1 :] == ["unsynced", "a_sync", "atom"]
    p = packets_of(b"\x9d\x00\x00")
    assert kinds(p)[2:] == ["error"] and p["info"][2] == ErrorReason.TRUNCATED and p["size"][2] == 3
    p = packets_of(b"\x00\x03\x00\x05")
    assert kinds(p)[2:] == ["discard", "overflow"]


def test_registers_from_the_device_file() -> None:
    """The snapshot device file's registers, as DS-5 (`NAME(id:0xN)`) and OpenCSD's captures
    (`NAME(0xOFFSET)`) write them; a file without one the stream needs is refused, naming it."""
    a55 = read_device(shared("opencsd-snapshots", "a55-test-tpiu", "device2.ini"))
    cfg = Etmv4Config.from_device(a55)
    assert (cfg.trace_id, cfg.title, cfg.vmid_bytes, cfg.context_id_bytes) == (1, "ETMv4.1", 4, 4)
    juno = read_device(shared("opencsd-snapshots", "juno-ret-stck", "device_6.ini"))
    cfg = Etmv4Config.from_device(juno)
    assert (cfg.trace_id, cfg.return_stack, cfg.vmid_bytes) == (0x10, True, 1)
    assert not cfg.commit_in_cycle_count  # TRCIDR0.COMMOPT
    partial = Device("ETM_0", "trace_source", "ETM4", Path("snap/device_6.ini"), {"TRCCONFIGR": 0xC1})
    with pytest.raises(CputraceError, match=r"snap/device_6.ini: \[regs\] has no TRCIDR0"):
        Etmv4Config.from_device(partial)


def test_registers_are_checked() -> None:
    with pytest.raises(CputraceError, match="expected an ETMv4 TRCIDR1"):
        config(trcidr1=0x4100F303)
    with pytest.raises(CputraceError, match="VMIDSIZE"):
        config(trcidr2=0x488 | 3 << 10)
    with pytest.raises(CputraceError, match="TRCCONFIGR"):
        config(trcconfigr=1 << 32)


# --- every ETMv4 snapshot against the reference decoder's packet listing --------------------------

SNAPSHOTS = (
    "juno_r1_1", "juno-uname-001", "juno-ret-stck", "a57_single_step", "a55-test-tpiu", "init-short-addr",
    "armv8_1m_branches", "bugfix-exact-match",
)  # fmt: skip
LISTER_KINDS = {
    "I_ASYNC": "a_sync", "I_TRACE_INFO": "trace_info", "I_TRACE_ON": "trace_on", "I_TIMESTAMP": "timestamp",
    "I_EXCEPT": "exception", "I_EXCEPT_RTN": "exception_return", "I_CTXT": "context", "I_IGNORE": "ignore",
    "I_ADDR_MATCH": "address_match", "I_BAD_SEQUENCE": "error", "I_INCOMPLETE_EOT": "error",
    "I_DISCARD": "discard", "I_OVERFLOW": "overflow", "I_COMMIT": "commit", "I_MISPREDICT": "mispredict",
    "I_EVENT": "event", "I_Q": "q", "I_FUNC_RET": "function_return", "I_COND_FLUSH": "cond_flush",
}  # fmt: skip
LISTER_PREFIXES = {
    "I_ADDR_CTXT_L_": "address_context", "I_ADDR_L_": "address_long", "I_ADDR_S_": "address_short",
    "I_ATOM_F": "atom", "I_CCNT_F": "cycle_count", "I_CANCEL_F": "cancel", "I_COND_I_F": "cond_instr",
    "I_COND_RES_F": "cond_result",
}  # fmt: skip
_ADDRESS = re.compile(r"Addr=0x([0-9A-Fa-f]+)(?:;|\s|$)")
_CONTEXT = re.compile(
    r"Ctxt: (AArch64|AArch32), ?EL(\d), (NS|S);(?: CID=0x([0-9a-f]+);)?(?: VMID=0x([0-9a-f]+);)?"
)


def lister_kind(name: str) -> str:
    if name in LISTER_KINDS:
        return LISTER_KINDS[name]
    return next(kind for prefix, kind in LISTER_PREFIXES.items() if name.startswith(prefix))


def listed_fields(p: ListedPacket) -> dict[str, object]:
    """What the reference's line says of a packet: its kind and the values its text gives."""
    name, text = p.name, p.text
    kind = lister_kind(name)
    out: dict[str, object] = {"kind": kind}
    if kind == "atom":
        out.update(format=int(name[-1]), atoms=text.rsplit(";", 1)[1].strip())
        return out
    if name.startswith(("I_CCNT_F", "I_CANCEL_F", "I_COND")):
        out["format"] = int(name[-1])
    if kind.startswith("address"):
        if (m := _ADDRESS.search(text)) is not None:  # fully known addresses only (no '?' digits)
            out["address"] = int(m[1], 16)
        if kind == "address_match":
            out["entry"] = int(re.search(r"\[(\d)\]", text)[1])
        else:
            out["is1"] = name.endswith("IS1")
        if "_L_" in name:
            out["bits"] = 64 if "_64IS" in name else 32
    if kind in ("context", "address_context"):
        if (m := _CONTEXT.search(text)) is not None:
            out.update(aarch64=m[1] == "AArch64", el=int(m[2]), ns=m[3] == "NS")
            if m[4] is not None:
                out["context_id"] = int(m[4], 16)
            if m[5] is not None:
                out["vmid"] = int(m[5], 16)
        else:
            out["same"] = "Ctxt: Same" in text
    elif kind == "timestamp":
        out["timestamp"] = int(re.search(r"Updated val = 0x([0-9a-f]+)", text)[1], 16)
    elif kind == "trace_info":
        out["info"] = int(re.search(r"INFO=0x([0-9a-f]+)", text)[1], 16)
    elif kind == "exception":
        out["exception"] = text.split(";")[1].strip().lower()
        out["e1e0"] = 2 if "Match Prev" in text else 1 if "Ret Addr Follows" in text else 0
    if (m := re.search(r"(?:; CC|Count)=0x([0-9a-f]+)", text)) is not None:
        out["cycles"] = int(m[1], 16)
    return out


_IS1, _AARCH64, _NS, _SAME = int(Flag.IS1), int(Flag.AARCH64), int(Flag.NS), int(Flag.CONTEXT_SAME)
OUR_VALUES = {
    "is1": lambda r, cfg: bool(r["flags"] & _IS1), "bits": lambda r, cfg: int(r["bits"]),
    "format": lambda r, cfg: int(r["info"]), "address": lambda r, cfg: int(r["address"]),
    "entry": lambda r, cfg: int(r["info"]), "aarch64": lambda r, cfg: bool(r["flags"] & _AARCH64),
    "el": lambda r, cfg: int(r["info"]), "ns": lambda r, cfg: bool(r["flags"] & _NS),
    "context_id": lambda r, cfg: int(r["value"]), "vmid": lambda r, cfg: int(r["value2"]),
    "same": lambda r, cfg: bool(r["flags"] & _SAME),
    "atoms": lambda r, cfg: _atom_text(int(r["atoms"]), int(r["count"])),
    "timestamp": lambda r, cfg: int(r["value"]), "cycles": lambda r, cfg: int(r["cycles"]),
    "info": lambda r, cfg: int(r["info"]), "e1e0": lambda r, cfg: int(r["info"]),
    "exception": lambda r, cfg: exception_name(int(r["exception"]), cfg.m_profile).lower(),
    "kind": lambda r, cfg: KIND_NAMES[r["kind"]],
}  # fmt: skip
"""Each value the reference's listing gives, from our packet record."""
_atom_text = functools.cache(atom_text)


def our_fields(r: np.void, cfg: Etmv4Config, wanted: dict[str, object]) -> dict[str, object]:
    """The same values from our packet record, for the keys the reference gives."""
    return {key: OUR_VALUES[key](r, cfg) for key in wanted}


@functools.cache
def snapshot_sources(name: str) -> list[tuple[EtmSource, str, Packets]]:
    """Each ETMv4 source of a snapshot: the source, its buffer's layout, its packets."""
    out = []
    for capture in open_captures(shared("opencsd-snapshots", name), {}):
        for source, batches in source_packets(capture):
            if isinstance(source.config, Etmv4Config):
                out.append((source, capture.layout, Packets.concatenate(list(batches))))
    return out


@functools.cache
def listing(name: str) -> dict[int, list[ListedPacket]]:
    return read_packets(shared("opencsd-snapshots", "reference", f"{name}.ppl.xz"))


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_packets_are_the_reference_decoders(name: str) -> None:
    """Every source's synchronised packets are the reference decoder's, one for one: the same
    bytes at the same place, kind, format, instruction set bit and address size, and the values
    its listing prints (addresses, exact-match entries, atoms, context, timestamps, trace info,
    exceptions). Its `Idx` is the byte's index in a raw stream; in a formatted buffer it counts
    from the frame and can fall short of the byte's offset by the frame's ID bytes, so the
    packet must start in the 16 bytes from it. The reference goes on after an invalid sequence
    without a new A-sync (and stops at a second): the comparison ends at the first error, where
    both must see one."""
    sources = snapshot_sources(name)
    assert sources
    for source, layout, packets in sources:
        cfg = source.config
        listed = [p for p in listing(name)[source.trace_id or 0] if p.name != "I_NOT_SYNC"]
        errors = [j for j, p in enumerate(listed) if p.name in ("I_BAD_SEQUENCE", "I_INCOMPLETE_EOT")]
        listed = listed[: errors[0] + 1] if errors else listed
        synced = np.flatnonzero(packets["kind"] != Kind.UNSYNCED)
        assert len(synced) == len(listed) or (errors and len(synced) > len(listed)), f"{name} {source.label}"
        ours = packets.table[synced[: len(listed)]]
        index = np.array([p.index for p in listed], np.int64)
        if layout == "source_data":
            assert np.array_equal(ours["offset"], index), f"{name} {source.label}"
        else:
            assert np.all((index <= ours["offset"]) & (ours["offset"] < index + 16)), f"{name} {source.label}"
        kinds = [KIND_NAMES[k] for k in ours["kind"]]
        assert kinds == [lister_kind(p.name) for p in listed], f"{name} {source.label}"
        in_stream = np.repeat(packets["kind"] != Kind.UNSYNCED, packets["size"])  # packets tile the stream
        ours_bytes = packets.stream[in_stream].tobytes()
        assert ours_bytes.startswith(b"".join(p.raw for p in listed if p.name != "I_BAD_SEQUENCE")), name
        for r, p in zip(ours, listed, strict=True):
            if p.name == "I_BAD_SEQUENCE":
                break
            wanted = listed_fields(p)
            where = f"{name} {source.label} packet at 0x{int(r['offset']):x} ({p.name}: {p.text})"
            assert our_fields(r, cfg, wanted) == wanted, where


# --- any bytes, real buffers corrupted, the listing command ------------------------------------


CONFIGS = (
    config(),
    config(trcidr0=0x08000EA1 | 1 << 6 | 1 << 15, trcconfigr=0xD1 | 1 << 8 | 1 << 13 | 1 << 16, trcidr8=4),
    config("Cortex-M55", trcconfigr=1, trcidr0=0x280006E1, trcidr1=0x4100F454, trcidr2=0x4),
)
"""Juno's A57; every optional packet on (cycle counts with commits, conditional trace, Q
elements, data trace); armv8_1m_branches' Cortex-M55."""


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=300),
    which=st.integers(0, len(CONFIGS) - 1),
    cuts=st.lists(st.integers(0, 400), max_size=6).map(sorted),
)
def test_any_bytes_decode_into_packets_that_tile_them(data: bytes, which: int, cuts: list[int]) -> None:
    """After an A-sync, any bytes: packets cover them exactly, in order; after an error, only
    unsynchronised bytes until an A-sync; fed in pieces to a decoder of small batches, the
    same packets."""
    cfg = CONFIGS[which]
    stream = A_SYNC + data
    whole = decode_packets(stream, cfg)
    check_tiling(stream, whole)
    check_fed_in_pieces(PacketDecoder(cfg, batch_packets=3), stream, cuts, whole)


CORRUPTED = {  # a snapshot, its ETMv4 source to plant an error in, the buffer holding it
    "juno_r1_1": (0x10, "cstrace.bin"),
    "juno-ret-stck": (0x14, "cstrace.bin"),
    "juno-uname-001": (0x10, "uname_trace.bin"),
    "armv8_1m_branches": (None, "trace.bin"),
}


def corrupted_copy(name: str, tmp_path: Path, seed: int) -> tuple[Path, int]:
    """The snapshot with its ETMv4 buffer corrupted: a reserved header (0x08) over the header
    of one of the source's packets after its first trace info (at an odd offset in a formatted
    buffer, which a formatter frame holds as it is), and random bytes at random places after
    it. Returns the snapshot.ini and the offset of the reserved header."""
    trace_id, buffer = CORRUPTED[name]
    folder = shared("opencsd-snapshots", name)
    for path in folder.iterdir():
        if path.name != buffer:
            (tmp_path / path.name).symlink_to(path)
    data = bytearray((folder / buffer).read_bytes())
    layout, packets = next((lay, p) for src, lay, p in snapshot_sources(name) if src.trace_id == trace_id)
    rng = random.Random(seed)
    synced = int(packets["offset"][np.argmax(packets["kind"] == Kind.TRACE_INFO)])
    headers = [int(o) for o, k in zip(packets["offset"], packets["kind"], strict=True)
               if k in (Kind.ATOM, Kind.ADDRESS_SHORT, Kind.ADDRESS_LONG, Kind.ADDRESS_CONTEXT)
               and o > synced and (o % 2 or layout == "source_data")]  # fmt: skip
    planted = rng.choice(headers)
    data[planted] = 0x08
    for _ in range(len(data) // 2000):
        data[rng.randrange(planted, len(data))] = rng.randrange(256)
    (tmp_path / buffer).write_bytes(bytes(data))
    return tmp_path / "snapshot.ini", planted


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", CORRUPTED)
def test_a_corrupted_buffer_gives_errors_and_resynchronises(name: str, seed: int, tmp_path: Path) -> None:
    """Every source of the corrupted buffer decodes into packets that tile its stream, errors
    are error packets naming their offsets (the planted reserved header first), each followed
    by unsynchronised bytes up to the next A-sync; the listing command shows them."""
    snapshot, planted = corrupted_copy(name, tmp_path, seed)
    trace_id = CORRUPTED[name][0]
    errors = {}
    for capture in open_captures(snapshot, {}):
        for source, batches in source_packets(capture):
            p = Packets.concatenate(list(batches))
            check_tiling(p.stream.tobytes(), p)
            errors[source.trace_id] = p.table[p["kind"] == Kind.ERROR]
    first = errors[trace_id][0]
    assert (int(first["offset"]), first["info"]) == (planted, ErrorReason.RESERVED_HEADER)
    only = ["--source", f"0x{trace_id:x}"] if trace_id is not None else []
    run = CliRunner().invoke(cli, ["etm", "packets", str(snapshot), *only, "--format", "jsonl"])
    assert run.exit_code == 0 and "Traceback" not in run.output
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    listed = [r for r in rows if r["kind"] == "error"]
    assert [r["offset"] for r in listed] == errors[trace_id]["offset"].tolist()
    assert listed[0]["error"] == "reserved packet header"


def test_each_source_reads_the_buffer_its_snapshot_lists() -> None:
    """A source's bytes come from the buffer `[source_buffers]` names for it (juno_r1_1: the
    ETMs' from ETB_0, the STM's from ETB_1), with the registers of its own device file."""
    trace = configparser.ConfigParser()
    trace.read(shared("opencsd-snapshots", "juno_r1_1", "trace.ini"))
    files = {trace[b]["name"]: trace[b]["file"] for b in trace["trace_buffers"]["buffers"].split(",")}
    listed = {source.lower(): files[buffer] for source, buffer in trace["source_buffers"].items()}
    captures = open_captures(shared("opencsd-snapshots", "juno_r1_1"), {})
    read = {s.name.lower(): c.path.name for c in captures for s in c.sources}
    assert read == {name: file for name, file in listed.items() if name.startswith("etm")}
    ids = {s.name: s.trace_id for c in captures for s in c.sources}
    assert ids == {f"ETM_{i}": 0x10 + i for i in range(6)}  # from each device file's TRCTRACEIDR


@pytest.mark.parametrize("name", ["armv8_1m_branches", "bugfix-exact-match", "a57_single_step"])
def test_a_cores_memory_is_every_dump_its_device_file_lists(name: str) -> None:
    """Several dumps a core (two ranges of a Cortex-M55 program; five sections of cc1), each
    file's bytes at the address its `[dump...]` section gives, read here from the ini file."""
    snapshot = read_snapshot(shared("opencsd-snapshots", name))
    for source in snapshot.sources:
        core = snapshot.core_of(source)
        ini = configparser.ConfigParser()
        ini.read(core.path)
        dumps = [ini[section] for section in ini.sections() if section.startswith("dump")]
        assert dumps
        memory = snapshot.memory(core)
        for dump in dumps:
            data = (core.path.parent / dump["file"]).read_bytes()
            assert memory.read(int(dump["address"], 0), len(data)) == data, (core.path, dump.name)


def test_every_listed_field_is_a_listing_column() -> None:
    """Every packet kind's listing fields are among the columns a csv listing writes (FIELDS),
    so none is dropped: a stream of every kind this configuration has, and errors."""
    cfg = CONFIGS[1]  # every optional packet on
    data = b"".join(bytes(part) for part in (
        [0x01, 0x0F, 0x01, 0x85, 0x01, 0x03, 0x40], [0x03, 0xC0, 0xA1, 0x05, 0x07], [0x06, 0x9C, 0x21],
        [0x04, 0x07, 0x73], [0x81, 0xF2, 0x2A, 0x78, 0x56, 0x34, 0x12, 0x80], [0x83, 0x01, 0x9A, 0x4F, 0, 0],
        [0x9D, 0, 0, 0x02, 0, 0, 0, 0, 0], [0x95, 0x59, 0x9A, 0x20, 0x19, 0x08, 0x00, 0x92],
        [0xA0, 0x05, 0xA5, 0x04, 0x07, 0xAC, 0x81, 0x01, 0xAF], [0x2D, 0x85, 0x01, 0x2F, 0x02, 0x32, 0x35],
        [0x3B, 0x0E, 0x03, 0x09, 0x0C, 0x35, 0x16], [0x6C, 0x85, 0x01, 0x6D, 0x05, 0x41, 0x43, 0x45, 0x4D],
        [0x5A, 0x34, 0x68, 0x92, 0x01, 0x03, 0x22, 0x2A], [0xF7, 0xD4, 0xE0, 0xD5], [0x00, 0x03, 0x00, 0x05],
        [0x08, 0x01],
    ))  # fmt: skip
    p = decode_packets(A_SYNC + TRACE_INFO + data, cfg)
    seen = set()
    for i in range(len(p)):
        fields = packet_fields(p, i, cfg)
        assert set(fields) <= set(FIELDS), (KIND_NAMES[p["kind"][i]], fields)
        seen.add(KIND_NAMES[p["kind"][i]])
    assert seen == {k.name.lower() for k in Kind} - {"ignore", "function_return"}  # ETMv4.0, A profile


def test_a_bare_buffer_with_an_etmv4_device_file() -> None:
    """A buffer without its snapshot, the registers from an ETMv4 device file (`--etm-config`):
    the same packets as the snapshot gives for that source; `--source` picks another trace ID
    (with the file's registers); ETMv3 register options with it are bad usage."""
    folder = shared("opencsd-snapshots", "juno_r1_1")
    buffer, device = folder / "cstrace.bin", folder / "device_7.ini"
    (capture,) = open_captures(buffer, {"etm_config": str(device)})
    ((source, batches),) = list(source_packets(capture))
    bare = Packets.concatenate(list(batches))
    snapshot = next(p for s, _, p in snapshot_sources("juno_r1_1") if s.trace_id == 0x11)
    assert source.trace_id == 0x11 and isinstance(source.config, Etmv4Config)
    assert all(np.array_equal(bare[name], snapshot[name]) for name in PACKET.names)
    (other,) = open_captures(buffer, {"etm_config": str(device), "source": 0x12})
    assert [s.trace_id for s in other.sources] == [0x12]
    argv = ["etm", "packets", str(buffer), "--etm-config", str(device), "--etmcr", "1"]
    run = CliRunner().invoke(cli, argv)
    assert run.exit_code == 2 and "option etmcr: ETMv3 and PTM only" in run.stderr


def test_etm_packets_lists_etmv4_as_the_reference_does() -> None:
    """`cputrace etm packets` on an ETMv4 snapshot: a line about the source on stderr, then its
    packets with their decoded fields, as the reference decoder lists them."""
    snapshot = shared("opencsd-snapshots", "juno_r1_1")
    run = CliRunner().invoke(cli, ["etm", "packets", str(snapshot), "--source", "0x11", "--format", "jsonl"])
    assert run.exit_code == 0, run.output
    assert "source 0x11 ETM_1, cpu_1 (Cortex-A53): ETMv4.0, A/R profile, 64-bit addresses" in run.stderr
    rows = [json.loads(line) for line in run.stdout.splitlines() if '"unsynced"' not in line]
    listed = [p for p in listing("juno_r1_1")[0x11] if p.name != "I_NOT_SYNC"]
    assert [r["kind"] for r in rows] == [lister_kind(p.name) for p in listed]
    addresses = [(r["address"], r["isa"]) for r in rows if "address" in r]
    # the first address comes before any context says AArch64: its instruction set is not known
    assert addresses[:2] == [(0xFFFFFFC000781E8C, "unknown"), (0xFFFFFFC000781E8C, "A64")]
    context = next(r for r in rows if r["kind"] == "address_context")
    assert (context["el"], context["flags"]) == (1, "ns aarch64")
    assert (context["context_id"], context["vmid"]) == (0, 0)
    text = CliRunner().invoke(cli, ["etm", "packets", str(snapshot), "--source", "0x11", "--limit", "40"])
    assert "atom format=2 atoms=EE" in text.stdout
    assert "address_context address=0xffffffc000781e8c isa=A64 bits=64 el=1" in text.stdout
