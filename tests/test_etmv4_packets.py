"""ETMv4 instruction trace packets: the packet vocabulary and the shared packet record it needs
(64-bit addresses, format-6 atom packets of 24 atoms)."""

from __future__ import annotations

import numpy as np

from cputrace.coresight import events
from cputrace.coresight import packets as shared
from cputrace.coresight.packets import PACKET, Packets
from cputrace.formats.etmv4.protocol import (
    ERROR_TEXT,
    EXPECTED,
    KIND_NAMES,
    MAX_ATOMS,
    ErrorReason,
    Kind,
    exception_name,
)
from cputrace.formats.ptm.protocol import KIND_NAMES as PTM_KIND_NAMES


def test_codes_the_events_layer_reads_mean_the_same_in_etmv4() -> None:
    """`coresight.events.common_event` reads these codes for every protocol: an ETMv4 kind with
    one of them must be the packet it means there, and the codes of packets ETMv4 lacks must
    name no ETMv4 kind (a commit read as a trigger would make false events)."""
    assert events.K_TIMESTAMP == Kind.TIMESTAMP and events.K_EXCEPTION_RETURN == Kind.EXCEPTION_RETURN
    for code in (shared.K_I_SYNC, shared.K_TRIGGER, shared.K_CONTEXT_ID, shared.K_VMID):
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
