"""The decoder options of the LEON formats: settings of a buffer that its dump does not give
(a `DUMP.json`, or a text form's `# leon-trace` headers, override them)."""

from __future__ import annotations

from ..base import Option
from .buffers import EXPECTED, MAX_CONTROL, MAX_CPU

CPU = Option("cpu", "number", "The CPU the buffer is of.", default=0, allowed=range(MAX_CPU + 1),
             expected=EXPECTED["cpu"])  # fmt: skip
ITBC0 = Option(
    "itbc0", "number", "The ITBC0 register (or the AHB buffer's control register): pointer and filter.",
    allowed=range(MAX_CONTROL + 1), expected=EXPECTED["control"],
)  # fmt: skip

OPTIONS = (CPU, ITBC0)
