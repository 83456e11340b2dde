"""PTM packets as readable fields, for listings (`cputrace etm packets`); the fields are among
`coresight.listing.FIELDS`, the columns PTM and ETMv3 listings share."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...coresight.listing import common_fields, isa_name
from ...coresight.packets import I_SYNC_REASONS, Packets
from .config import PtmConfig
from .protocol import ERROR_TEXT, KIND_NAMES, Flag, Kind, exception_name


def packet_fields(packets: Packets, index: int, config: PtmConfig) -> dict[str, Any]:
    """The fields that mean something for this packet's kind (see `packets` for their sources)."""
    common = common_fields(packets, index, KIND_NAMES, ERROR_TEXT, Flag.CLOCK_CHANGED)
    return common if common is not None else _own_fields(packets.table[index], config)


def _own_fields(r: np.void, config: PtmConfig) -> dict[str, Any]:
    kind = Kind(int(r["kind"]))
    flags = int(r["flags"])
    out: dict[str, Any] = {}
    if kind in (Kind.I_SYNC, Kind.BRANCH, Kind.WAYPOINT_UPDATE):
        out["address"] = int(r["address"])
        out["isa"] = isa_name(int(r["isa"]))
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
    return out
