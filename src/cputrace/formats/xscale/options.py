"""The decoder options of the `xscale` format: the form of the input and, for a raw buffer,
the registers read out with it (see `buffers`)."""

from __future__ import annotations

from ..base import ARM_VECTOR_OPTIONS, Option, bits

FORMS = ("raw", "text", "openocd")

XSCALE_INPUT = Option(
    "xscale_input", "choice", "The input's form: raw buffer, hex text or OpenOCD dump (default: sniffed).",
    choices=FORMS,
)  # fmt: skip
XSCALE_CHKPT0 = Option("xscale_chkpt0", "number", "Raw buffer: the CHKPT0 register.", allowed=bits(32))
XSCALE_CHKPT1 = Option("xscale_chkpt1", "number", "Raw buffer: the CHKPT1 register.", allowed=bits(32))
XSCALE_PC = Option("xscale_pc", "number", "Raw buffer: the pc at debug entry.", allowed=bits(32))

OPTIONS = (XSCALE_INPUT, XSCALE_CHKPT0, XSCALE_CHKPT1, XSCALE_PC, *ARM_VECTOR_OPTIONS)
