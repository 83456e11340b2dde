"""The GR740 AHB trace buffer: bus transfers into `memory` (source `bus`), breakpoint hits as events."""

from __future__ import annotations

from ...rowbuffer import RowBuffer
from .buffers import Buffer
from .timeorder import oldest_first, unwrap_time

_HTRANS = ("IDLE", "BUSY", "NONSEQ", "SEQ")
_HBURST = ("SINGLE", "INCR", "WRAP4", "INCR4", "WRAP8", "INCR8", "WRAP16", "INCR16")
_HRESP = ("OKAY", "ERROR", "RETRY", "SPLIT")


def ahb_rows(buffer: Buffer, seq: int, memory: RowBuffer, events: RowBuffer) -> None:
    """A `memory` row per NONSEQ/SEQ transfer, a `trigger` event per AHB breakpoint hit, all
    at `seq`: the buffer tells no instruction, so they go with the next one of the input.

    Bits: 127 breakpoint hit, 125:96 time tag, 79 HWRITE, 78:77 HTRANS, 76:74 HSIZE,
    73:71 HBURST, 70:67 HMASTER, 66 HMASTLOCK, 65:64 HRESP, 63:32 data, 31:0 HADDR.
    IDLE and BUSY cycles move no data and are left out.
    """
    order = oldest_first(buffer.words, buffer.control)
    words = buffer.words[order]
    times = unwrap_time(words[:, 0] & 0x3FFFFFFF)
    sources = buffer.src[order].tolist()
    for (w0, w1, w2, w3), time, src in zip(words.tolist(), times.tolist(), sources, strict=True):
        common = {"seq": seq, "time": time, "cpu": buffer.cpu, "src": src}
        if w0 >> 31:
            events.append(**common, kind="trigger", name="ahb_breakpoint", value=w3,
                          text=f"AHB breakpoint hit at 0x{w3:08x}")  # fmt: skip
        htrans = (w1 >> 13) & 3
        if htrans < 2:
            continue
        size = 1 << ((w1 >> 10) & 7)
        attrs = [
            f"master={(w1 >> 3) & 0xF}", f"htrans={_HTRANS[htrans]}", f"hsize={(w1 >> 10) & 7}",
            f"hburst={_HBURST[(w1 >> 7) & 7]}", f"hresp={_HRESP[w1 & 3]}",
        ]  # fmt: skip
        if (w1 >> 2) & 1:
            attrs.insert(0, "L")
        lane = w3 & 3 & (4 - size)  # byte lane of a narrow access (a misaligned one: its aligned lane)
        value = w2 if size >= 4 else (w2 >> (8 * (4 - size - lane))) & ((1 << (8 * size)) - 1)
        memory.append(**common, op="W" if (w1 >> 15) & 1 else "R", source="bus", size=min(size, 4), addr=w3,
                      value=value, attrs=" ".join(attrs))  # fmt: skip

