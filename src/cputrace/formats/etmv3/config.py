"""The ETM registers that shape an ETMv3 bit stream (ETMCR, ETMIDR, ETMCCER), as a snapshot's
device file or a bare buffer's settings (`coresight.bare`) give them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...coresight.registers import TraceRegisters, bit, major_version

DEFAULT_ETMIDR = 0x4100F250
DEFAULT_ETMCCER = 0x10000000
ETMV3_MAJOR = 2  # ETMIDR bits 11:8 hold the major version minus one

CONFIG = np.dtype(
    [
        ("cycle_accurate", "?"), ("context_id_bytes", "u1"), ("data_value", "?"), ("data_address", "?"),
        ("data_only", "?"), ("alt_branch", "?"), ("timestamp_64", "?"), ("timestamp_gray", "?"),
        ("alt_isa", "?"), ("hyp", "?"), ("m_profile", "?"),
    ]
)  # fmt: skip
"""The properties the compiled packet decoder reads (one record)."""


def is_etmv3(etmidr: int) -> bool:
    """Whether an ETMIDR names an ETMv3 (its major version field, bits 11:8)."""
    return major_version(etmidr) == ETMV3_MAJOR


@dataclass(frozen=True)
class EtmConfig(TraceRegisters):
    """ETMCR, ETMIDR and ETMCCER of one ETM, with the stream properties they imply."""

    etmidr: int = DEFAULT_ETMIDR
    etmccer: int = DEFAULT_ETMCCER

    MAJOR: ClassVar[int] = ETMV3_MAJOR
    ID: ClassVar[str] = f"an ETMv3 ETMIDR (major version field, bits 11:8, {ETMV3_MAJOR}; a PTM: type PTM1.x)"
    STREAM: ClassVar[str] = "an ETMv3 stream"
    REQUIRED: ClassVar[tuple[str, ...]] = ("ETMCR",)

    @property
    def version(self) -> str:
        return f"3.{self.minor_version}"

    @property
    def title(self) -> str:
        return f"ETMv{self.version}"

    @property
    def data_value(self) -> bool:
        return bit(self.etmcr, 2)

    @property
    def data_address(self) -> bool:
        return bit(self.etmcr, 3)

    @property
    def data_only(self) -> bool:
        return bit(self.etmcr, 20)

    @property
    def alt_branch(self) -> bool:
        """The alternative branch address encoding (ETMv3.4 and later, ETMIDR bit 20)."""
        return bit(self.etmidr, 20) and self.minor_version >= 4

    @property
    def timestamp_64(self) -> bool:
        return bit(self.etmccer, 29)

    @property
    def timestamp_gray(self) -> bool:
        return not bit(self.etmccer, 28)

    @property
    def virtualization(self) -> bool:
        return bit(self.etmccer, 26)

    @property
    def m_profile(self) -> bool:
        return bool(self.core) and self.core.upper().startswith("CORTEX-M")

    def as_record(self) -> np.ndarray:
        """The properties the compiled decoder needs, as one CONFIG record."""
        record = np.zeros(1, CONFIG)
        for name in ("cycle_accurate", "context_id_bytes", "data_value", "data_address", "data_only",
                     "alt_branch", "timestamp_64", "timestamp_gray", "m_profile"):  # fmt: skip
            record[name] = getattr(self, name)
        record["alt_isa"] = self.minor_version >= 3
        record["hyp"] = self.virtualization
        return record

    def traced(self) -> list[str]:
        data = [name for name, on in (("address", self.data_address), ("value", self.data_value)) if on]
        return (["data " + "+".join(data)] if data else []) + (["data only"] if self.data_only else [])

    def options(self) -> list[str]:
        return ["alternative branch encoding"] if self.alt_branch else []
