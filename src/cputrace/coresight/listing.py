"""Packets of the CoreSight trace protocols (ETMv3, PTM, ETMv4) as listing rows (`cputrace etm
packets`): the columns they share, the fields of the packets they have in common, and a
row's text. Each protocol's `listing` gives the fields of its own packets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model import Isa
from .packets import Packets

FIELDS = (
    "address", "isa", "atoms", "cycles", "timestamp", "context_id", "vmid", "value", "exception",
    "resume", "reason", "flags", "bits", "lsip_address", "tag", "bytes", "error", "el", "format", "commit",
    "cancel", "count", "entry", "key", "speculation", "threshold", "event", "marker", "e1e0", "value2",
)  # fmt: skip
"""Every field a protocol's `packet_fields` can give, in listing order (csv columns)."""

ISA_NAMES: dict[int, str] = {
    Isa.A32: "A32", Isa.T32: "T32", Isa.A64: "A64", Isa.T32EE: "T32EE", Isa.JAZELLE: "Jazelle",
}  # fmt: skip


def isa_name(isa: int) -> str:
    """The instruction set a packet's `isa` names, as listings show it."""
    return ISA_NAMES.get(isa, "unknown")


def common_fields(
    packets: Packets, index: int, kind_names: Sequence[str], error_text: Mapping[int, str], clock_changed: int
) -> dict[str, Any] | None:
    """The fields of a packet every protocol has, by its kind's name in the protocol's
    `kind_names` (timestamp, context ID, VMID, error, unsynced bytes), with its error texts and
    its `flags` bit for a changed clock; None for any other kind."""
    r = packets.table[index]
    kind = kind_names[int(r["kind"])]
    if kind == "timestamp":
        out: dict[str, Any] = {"timestamp": int(packets["value"][index]), "bits": int(r["bits"])}
        if r["cycles"] >= 0:
            out["cycles"] = int(r["cycles"])
        if int(r["flags"]) & clock_changed:
            out["flags"] = "clock_changed"
        return out
    if kind == "context_id":
        return {"context_id": int(r["value"])}
    if kind == "vmid":
        return {"vmid": int(r["value"])}
    if kind == "error":
        return {"error": error_text[int(r["info"])]}
    if kind == "unsynced":
        return {"bytes": int(r["size"])}
    return None


def packet_text(kind: str, fields: dict[str, Any]) -> str:
    """`kind key=value ...` with addresses and IDs in hex (of every protocol's packets alike)."""
    parts = [kind]
    for key, value in fields.items():
        if key == "flags":
            parts.append(value)
        elif key in ("address", "lsip_address", "context_id", "vmid", "value", "value2"):
            parts.append(f"{key}=0x{value:x}")
        elif key == "error":
            parts.append(f"({value})")
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)
