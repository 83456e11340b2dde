"""ETMv3 packets as readable fields, for listings (`cputrace etm packets`); the columns and a
row's text are `coresight.listing`'s, which PTM listings share."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...coresight.listing import common_fields, isa_name
from ...coresight.packets import I_SYNC_REASONS
from .config import EtmConfig
from .packets import Packets
from .protocol import ERROR_TEXT, KIND_NAMES, Flag, Kind, exception_name


def _atoms(bits: int, count: int, cycles: int, fmt: int, cycle_accurate: bool) -> str:
    """E/N atoms oldest first; in cycle-accurate mode with the W (cycle) atoms where they fall."""
    atoms = "".join("E" if (bits >> i) & 1 else "N" for i in range(count))
    if not cycle_accurate:
        return atoms
    if fmt == 1:
        return "".join("W" + a for a in atoms)
    if fmt == 2:
        return "W" + atoms
    if fmt == 3:
        return "W" * cycles + atoms
    return atoms


def _flag_names(flags: int, shown: Flag) -> list[str]:
    return [flag.name.lower() for flag in Flag if flags & flag & shown]


def packet_fields(packets: Packets, index: int, config: EtmConfig) -> dict[str, Any]:
    """The fields that mean something for this packet's kind (see `packets` for their sources)."""
    common = common_fields(packets, index, KIND_NAMES, ERROR_TEXT, Flag.CLOCK_CHANGED)
    return common if common is not None else _own_fields(packets.table[index], config)


def _own_fields(r: np.void, config: EtmConfig) -> dict[str, Any]:
    kind = Kind(int(r["kind"]))
    flags = int(r["flags"])
    out: dict[str, Any] = {}
    if kind in (Kind.I_SYNC, Kind.BRANCH):
        if kind == Kind.BRANCH or r["bits"]:
            out["address"] = int(r["address"])
            out["isa"] = isa_name(int(r["isa"]))
        if kind == Kind.I_SYNC:
            out["reason"] = I_SYNC_REASONS[int(r["info"])]
            if r["cycles"] >= 0:
                out["cycles"] = int(r["cycles"])
            if config.context_id_bytes:
                out["context_id"] = int(r["value"])
            if flags & Flag.LSIP:
                out["lsip_address"] = int(r["address2"])
        else:
            out["bits"] = int(r["bits"])
            if r["exception"] >= 0:
                out["exception"] = exception_name(int(r["exception"]), config.m_profile)
            if r["info"]:
                out["resume"] = int(r["info"])
        names = _flag_names(flags, Flag.NS | Flag.HYP | Flag.ALT_ISA | Flag.CANCEL | Flag.DEPRECATED)
        names += _flag_names(flags, Flag.PARTIAL_ADDRESS)
        if names:
            out["flags"] = " ".join(names)
    elif kind == Kind.P_HEADER:
        cycles = int(r["cycles"])
        out["atoms"] = _atoms(int(r["atoms"]), int(r["count"]), cycles, int(r["info"]), config.cycle_accurate)
        if r["cycles"] >= 0:
            out["cycles"] = int(r["cycles"])
    elif kind == Kind.CYCLE_COUNT:
        out["cycles"] = int(r["cycles"])
    elif kind in (Kind.NORMAL_DATA, Kind.OOO_DATA, Kind.OOO_PLACEHOLDER, Kind.VALUE_NOT_TRACED):
        if r["bits"]:
            out["address"] = int(r["address"])
            out["bits"] = int(r["bits"])
        if kind in (Kind.NORMAL_DATA, Kind.OOO_DATA) and r["count"]:
            out["value"] = int(r["value"])
            out["bytes"] = int(r["count"])
        if kind in (Kind.OOO_DATA, Kind.OOO_PLACEHOLDER):
            out["tag"] = int(r["info"])
        if flags & Flag.BIG_ENDIAN:
            out["flags"] = "big_endian"
    return out

