"""PTM packets as readable fields, for listings (`cputrace etm packets`); the fields are among
the ETMv3 listing's (`etmv3.listing.FIELDS`), so both protocols share its columns."""

from __future__ import annotations

from typing import Any

from ...coresight.packets import Packets
from ..etmv3.protocol import ISA_NAMES
from .config import PtmConfig
from .protocol import ERROR_TEXT, I_SYNC_REASONS, Flag, Kind, exception_name


def packet_fields(packets: Packets, index: int, config: PtmConfig) -> dict[str, Any]:
    """The fields that mean something for this packet's kind (see `packets` for their sources)."""
    r = packets.table[index]
    kind = Kind(int(r["kind"]))
    flags = int(r["flags"])
    out: dict[str, Any] = {}
    if kind in (Kind.I_SYNC, Kind.BRANCH, Kind.WAYPOINT_UPDATE):
        out["address"] = int(r["address"])
        out["isa"] = ISA_NAMES.get(int(r["isa"]), "unknown")
        if kind == Kind.I_SYNC:
            out["reason"] = I_SYNC_REASONS[int(r["info"])]
            if config.context_id_bytes:
                out["context_id"] = int(r["value"])
        else:
            out["bits"] = int(r["bits"])
        if r["exception"] >= 0:
            out["exception"] = exception_name(int(r["exception"]))
        if r["cycles"] >= 0:
            out["cycles"] = int(r["cycles"])
        names = [flag.name.lower() for flag in Flag if flags & flag & (Flag.NS | Flag.HYP | Flag.ALT_ISA)]
        names += ["partial_address"] if flags & Flag.PARTIAL_ADDRESS else []
        if names:
            out["flags"] = " ".join(names)
    elif kind == Kind.ATOM:
        out["atoms"] = "".join("E" if (int(r["atoms"]) >> i) & 1 else "N" for i in range(int(r["count"])))
        if r["cycles"] >= 0:
            out["cycles"] = int(r["cycles"])
    elif kind == Kind.TIMESTAMP:
        out["timestamp"] = int(packets["value"][index])
        out["bits"] = int(r["bits"])
        if r["cycles"] >= 0:
            out["cycles"] = int(r["cycles"])
        if flags & Flag.CLOCK_CHANGED:
            out["flags"] = "clock_changed"
    elif kind == Kind.CONTEXT_ID:
        out["context_id"] = int(r["value"])
    elif kind == Kind.VMID:
        out["vmid"] = int(r["value"])
    elif kind == Kind.ERROR:
        out["error"] = ERROR_TEXT[int(r["info"])]
    elif kind == Kind.UNSYNCED:
        out["bytes"] = int(r["size"])
    return out
