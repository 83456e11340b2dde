"""What kind of CoreSight input a file is, from its first bytes (no decoding machinery needed)."""

from __future__ import annotations

FRAME_BYTES = 16
LAYOUTS = ("coresight", "dstream_coresight", "source_data")
"""How a buffer holds trace: formatter frames in memory, frames with syncs from a port, or one bare stream."""
SNAPSHOT_INI = "snapshot.ini"
"""The file a CoreSight snapshot's folder holds its description in."""
FULL_SYNC = b"\xff\xff\xff\x7f"
"""A full frame sync: never frame content (its FF bytes would be trace IDs 0x7F)."""


def sniff_layout(head: bytes) -> str:
    """The likely layout of a bare buffer from its first bytes.

    A full frame sync cannot be frame content (its FF bytes would be IDs 0x7F), so one means a
    port capture, unless it is part of a frame of four at a frame boundary (memory padding). A
    single ETM stream usually starts with an A-sync (five 0x00 then 0x80). Otherwise: frames
    in memory."""
    at = head.find(FULL_SYNC)
    if at >= 0 and (at % FRAME_BYTES or head[at : at + FRAME_BYTES] != FULL_SYNC * 4):
        return "dstream_coresight"
    if head.startswith(b"\x00" * 5) and head.lstrip(b"\x00")[:1] == b"\x80":
        return "source_data"
    return "coresight"


def is_snapshot_ini(head: bytes) -> bool:
    """True for the start of a snapshot.ini: a [snapshot] or [device_list] section."""
    text = head[:4096].decode("latin-1").lower()
    return "[device_list]" in text or text.lstrip().startswith("[snapshot]")
