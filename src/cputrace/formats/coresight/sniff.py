"""Recognising CoreSight inputs: a snapshot.ini, a trace port capture, or a stream that starts
with an A-sync."""

from __future__ import annotations

from ...coresight.sniff import is_snapshot_ini, sniff_layout


def sniff(head: bytes) -> int:
    """Sure of a snapshot.ini; fairly sure of port frame syncs or a leading A-sync.

    Buffers of formatter frames in memory (ETB, ETR) have no signature: name them with --format.
    """
    if is_snapshot_ini(head):
        return 90
    return 60 if sniff_layout(head) != "coresight" else 0
