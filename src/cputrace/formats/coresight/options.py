"""The decoder options of the `coresight` format: which source to decode and, for a buffer that
comes without a snapshot, the ETM registers and layout that shape it (see `bare`)."""

from __future__ import annotations

from ...coresight.sniff import LAYOUTS
from ..base import Option, bits

TRACE_IDS = range(0x01, 0x70)  # 0x00 is the null source, 0x70-0x7F are reserved

SOURCE = Option(
    "source", "number", "Only the trace source with this trace ID (e.g. 0x11).",
    allowed=TRACE_IDS, expected=f"a trace ID from 0x{TRACE_IDS[0]:02X} to 0x{TRACE_IDS[-1]:02X}",
)  # fmt: skip
ETM_CONFIG = Option(
    "etm_config", "file",
    "Bare buffer: ETM registers from an ini ([etm] etmcr=...) or JSON file, or a snapshot device file "
    "(an ETMv4's makes the buffer ETMv4).",
    expected="an ETM configuration file (ini or JSON)",
)  # fmt: skip
ETMCR = Option("etmcr", "number", "Bare buffer: ETM main control register.", allowed=bits(32))
ETMIDR = Option(
    "etmidr", "number", "Bare buffer: ETM ID register (default 0x4100F250; a PTM's, 0x411CF3xx, for PFT).",
    allowed=bits(32),
)
ETMCCER = Option("etmccer", "number", "Bare buffer: configuration code extension register.", allowed=bits(32))
BUFFER_FORMAT = Option(
    "buffer_format", "choice",
    "Bare buffer: formatter frames in memory, a trace port capture, or one raw source (default: sniffed).",
    choices=LAYOUTS,
)  # fmt: skip

BARE_BUFFER_OPTIONS = (ETM_CONFIG, ETMCR, ETMIDR, ETMCCER, BUFFER_FORMAT)
"""What a snapshot gives itself: options for bare buffers only."""
OPTIONS = (SOURCE, *BARE_BUFFER_OPTIONS)
