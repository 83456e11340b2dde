"""The registers that shape a PTM's PFT stream (ETMCR, ETMIDR, ETMCCER: ARM IHI 0035B,
chapter 3), and the properties they imply.

A snapshot's device file (`type=PTM1.0`, `PTM1.1`, `PFT1.1`...) gives them; a bare buffer
takes them from the same options as ETMv3 (`--etmcr`, `--etmidr` with a PTM's ETMIDR, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...coresight.registers import TraceRegisters, bit, major_version

PTM_MAJOR = 3  # ETMIDR bits 11:8 of a PTM
DEFAULT_ETMCCER = 0

CONFIG = np.dtype(
    [("cycle_accurate", "?"), ("context_id_bytes", "u1"), ("timestamp_64", "?"), ("timestamp_gray", "?")]
)
"""The properties the compiled packet decoder reads (one record)."""


def is_ptm(etmidr: int) -> bool:
    """Whether an ETMIDR names a PTM (its major version field, bits 11:8)."""
    return major_version(etmidr) == PTM_MAJOR


@dataclass(frozen=True)
class PtmConfig(TraceRegisters):
    """ETMCR, ETMIDR and ETMCCER of one PTM, with the stream properties they imply."""

    etmccer: int = DEFAULT_ETMCCER

    MAJOR: ClassVar[int] = PTM_MAJOR
    ID: ClassVar[str] = f"a PTM ETMIDR (major version field, bits 11:8, {PTM_MAJOR})"
    STREAM: ClassVar[str] = "a PTM stream"
    REQUIRED: ClassVar[tuple[str, ...]] = ("ETMCR", "ETMIDR")

    @property
    def version(self) -> str:
        """1.0 for PFT v1.0, 1.1 for PFT v1.1 (ETMIDR bits 7:4 the minor version)."""
        return f"1.{self.minor_version}"

    @property
    def title(self) -> str:
        return f"PTM (PFT v{self.version})"

    @property
    def branch_broadcast(self) -> bool:
        return bit(self.etmcr, 8)

    @property
    def return_stack(self) -> bool:
        return bit(self.etmcr, 29)

    @property
    def data_barrier_waypoints(self) -> bool:
        """DMB and DSB are waypoints, as branches and ISBs are (ETMCCER bit 24, 3.4.3)."""
        return bit(self.etmccer, 24)

    @property
    def timestamp_64(self) -> bool:
        """64-bit timestamps (PFT v1.1 only, ETMCCER bit 29); else 48-bit."""
        return self.minor_version >= 1 and bit(self.etmccer, 29)

    @property
    def timestamp_gray(self) -> bool:
        """Gray-coded timestamps: always in PFT v1.0, unless ETMCCER bit 28 says natural binary."""
        return self.minor_version == 0 or not bit(self.etmccer, 28)

    data_only = data_value = data_address = False  # PTMs trace no data
    m_profile = False

    def as_record(self) -> np.ndarray:
        """The properties the compiled decoder needs, as one CONFIG record."""
        record = np.zeros(1, CONFIG)
        record["cycle_accurate"] = self.cycle_accurate
        record["context_id_bytes"] = self.context_id_bytes
        record["timestamp_64"] = self.timestamp_64
        record["timestamp_gray"] = self.timestamp_gray
        return record

    def options(self) -> list[str]:
        named = (
            ("return stack", self.return_stack), ("branch broadcast", self.branch_broadcast),
            ("DMB/DSB waypoints", self.data_barrier_waypoints),
        )  # fmt: skip
        return [name for name, on in named if on]
