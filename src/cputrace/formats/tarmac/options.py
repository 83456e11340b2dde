"""The decoder options of the `tarmac` format."""

from __future__ import annotations

from ..base import ARM_VECTOR_OPTIONS, Option, bits

DEFAULT_ISA = Option(
    "default_isa", "choice",
    "ISA of instructions whose records name none (T32 as on Cortex-M; SPARC: LEON traces as Tarmac).",
    default="T32", choices=("A32", "T32", "A64", "SPARC"),
)  # fmt: skip
BYTE_ORDER = Option(
    "byte_order", "choice", "Byte order of MR/MW values (big: a big-endian system's).",
    default="little", choices=("little", "big"),
)  # fmt: skip
VBAR = Option(
    "vbar", "number", "Flow-only A64 traces: VBAR, where exceptions the trace gives no vector for go.",
    allowed=bits(64),
)  # fmt: skip

OPTIONS = (DEFAULT_ISA, BYTE_ORDER, *ARM_VECTOR_OPTIONS, VBAR)
