"""ETMv4 packets as readable fields, for listings (`cputrace etm packets`); the fields are among
`coresight.listing.FIELDS`, the columns every protocol's listing shares."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...coresight.listing import common_fields, isa_name
from ...coresight.packets import Packets
from .config import Etmv4Config
from .protocol import ERROR_TEXT, KIND_NAMES, Flag, Kind, exception_name

FORMATTED_KINDS = (
    Kind.ATOM, Kind.MISPREDICT, Kind.CANCEL, Kind.CYCLE_COUNT, Kind.COND_INSTR, Kind.COND_RESULT,
)  # fmt: skip
ADDRESS_KINDS = (Kind.ADDRESS_CONTEXT, Kind.ADDRESS_LONG, Kind.ADDRESS_SHORT, Kind.ADDRESS_MATCH)
FLAG_NAMES = (
    (Flag.NS, "ns"), (Flag.AARCH64, "aarch64"), (Flag.CONTEXT_SAME, "context_same"), (Flag.IS1, "is1"),
    (Flag.PARTIAL_ADDRESS, "partial_address"), (Flag.UNKNOWN_COUNT, "unknown_count"),
    (Flag.MISPREDICT, "mispredict"), (Flag.COND_FINAL, "final"), (Flag.FAULT_PENDING, "fault_pending"),
)  # fmt: skip
"""The flags listings show, by name (the others are shown as the fields they announce)."""


def packet_fields(packets: Packets, index: int, config: Etmv4Config) -> dict[str, Any]:
    """The fields that mean something for this packet's kind (see `protocol` for their sources)."""
    common = common_fields(packets, index, KIND_NAMES, ERROR_TEXT, 0)
    return common if common is not None else _own_fields(packets.table[index], config)


def atom_text(atoms: int, count: int) -> str:
    """Atoms oldest first, E executed, N not."""
    return "".join("E" if (atoms >> i) & 1 else "N" for i in range(count))


def _own_fields(r: np.void, config: Etmv4Config) -> dict[str, Any]:
    kind = Kind(int(r["kind"]))
    flags = int(r["flags"])
    out: dict[str, Any] = {}
    if kind == Kind.TRACE_INFO:
        out.update(value=int(r["info"]), key=int(r["value"]), speculation=int(r["value2"]))
        out["threshold"] = int(r["cycles"])
    elif kind in ADDRESS_KINDS or (kind == Kind.Q and flags & Flag.Q_ADDRESS):
        out.update(address=int(r["address"]), isa=isa_name(int(r["isa"])))
        if kind == Kind.ADDRESS_MATCH or (kind == Kind.Q and int(r["bits"]) == 0):
            out["entry"] = int(r["info"])
        else:
            out["bits"] = int(r["bits"])
    if kind in (Kind.CONTEXT, Kind.ADDRESS_CONTEXT):
        out["el"] = int(r["info"])
        if flags & Flag.CONTEXT_ID:
            out["context_id"] = int(r["value"])
        if flags & Flag.VMID:
            out["vmid"] = int(r["value2"])
    elif kind == Kind.EXCEPTION:
        out.update(exception=exception_name(int(r["exception"]), config.m_profile), e1e0=int(r["info"]))
    elif kind in FORMATTED_KINDS:
        if kind != Kind.MISPREDICT:
            out["format"] = int(r["info"])
        if kind in (Kind.ATOM, Kind.MISPREDICT) or (kind == Kind.CANCEL and r["count"]):
            out["atoms"] = atom_text(int(r["atoms"]), int(r["count"]))
        if kind == Kind.CANCEL:
            out["cancel"] = int(r["value"])
        elif kind == Kind.CYCLE_COUNT:
            if r["cycles"] >= 0:
                out["cycles"] = int(r["cycles"])
            if flags & Flag.COMMIT:
                out["commit"] = int(r["value"])
        elif kind in (Kind.COND_INSTR, Kind.COND_RESULT):
            out["value"] = int(r["value"])
            if flags & Flag.COND_TWO:
                out["value2"] = int(r["value2"])
            if kind == Kind.COND_RESULT and int(r["info"]) in (1, 2):
                out["count"] = int(r["count"])
    elif kind == Kind.COMMIT:
        out["commit"] = int(r["value"])
    elif kind == Kind.Q and not flags & Flag.UNKNOWN_COUNT:
        out["count"] = int(r["value"])
    elif kind == Kind.EVENT:
        out["event"] = int(r["value"])
    elif kind in (Kind.NUMBERED_DATA_SYNC, Kind.UNNUMBERED_DATA_SYNC):
        out["marker"] = int(r["value"])
    names = [name for flag, name in FLAG_NAMES if flags & flag]
    if names:
        out["flags"] = " ".join(names)
    return out
