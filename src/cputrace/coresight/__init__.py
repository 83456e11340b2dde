"""CoreSight infrastructure shared by every trace protocol: formatter frames and snapshots."""

from .frames import (
    FORMATTED_LAYOUTS,
    LAYOUTS,
    Deformatter,
    FrameStats,
    SourceBytes,
    deformat,
    sniff_layout,
)
from .snapshot import Device, Snapshot, TraceBuffer, is_snapshot_ini, read_snapshot

__all__ = [
    "FORMATTED_LAYOUTS",
    "LAYOUTS",
    "Deformatter",
    "Device",
    "FrameStats",
    "Snapshot",
    "SourceBytes",
    "TraceBuffer",
    "deformat",
    "is_snapshot_ini",
    "read_snapshot",
    "sniff_layout",
]
