"""What every CoreSight packet decoder's tests check of any bytes (ETMv3, PTM, ETMv4)."""

from __future__ import annotations

import numpy as np

from cputrace.coresight.packets import K_A_SYNC, K_ERROR, K_UNSYNCED, Packets, PacketScanner


def check_tiling(data: bytes, packets: Packets) -> None:
    """The packets cover `data` exactly, in order; after an error, only unsynchronised bytes
    until an A-sync."""
    assert b"".join(packets.raw(i) for i in range(len(packets))) == data
    starts = np.concatenate([[0], np.cumsum(packets["size"])])[: len(packets)].astype(np.int64)
    assert np.array_equal(packets["pos"], starts)
    for i in np.flatnonzero(packets["kind"] == K_ERROR)[:-1]:
        assert packets["kind"][i + 1] in (K_UNSYNCED, K_A_SYNC)


def check_fed_in_pieces(decoder: PacketScanner, data: bytes, cuts: list[int], whole: Packets) -> None:
    """`data` fed to `decoder` in pieces ending at `cuts` (sorted, any values) decodes to the
    packets of the whole, `whole`."""
    pieces, start = [], 0
    for cut in [min(c, len(data)) for c in cuts] + [len(data)]:
        chunk = np.frombuffer(data[start:cut], np.uint8)
        pieces += decoder.feed(chunk, np.arange(start, max(cut, start), dtype=np.int64))
        start = max(cut, start)
    pieces += decoder.finish()
    joined = Packets.concatenate(pieces)
    assert all(np.array_equal(joined[name], whole[name]) for name in whole.table.dtype.names)
