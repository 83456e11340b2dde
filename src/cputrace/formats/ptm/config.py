"""The registers that shape a PTM's PFT stream (ETMCR, ETMIDR, ETMCCER: ARM IHI 0035B,
chapter 3), and the properties they imply.

A snapshot's device file (`type=PTM1.0`, `PTM1.1`, `PFT1.1`...) gives them; a bare buffer
takes them from the same options as ETMv3 (`--etmcr`, `--etmidr` with a PTM's ETMIDR, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...coresight.snapshot import Device
from ...errors import CputraceError, TraceFormatError

PTM_MAJOR = 3  # ETMIDR bits 11:8 of a PTM
MAX_REGISTER = 0xFFFFFFFF
DEFAULT_ETMCCER = 0

PTM_ID = f"a PTM ETMIDR (major version field, bits 11:8, {PTM_MAJOR})"
"""What an ETMIDR must be for this decoder, as error messages say it."""

CONFIG = np.dtype(
    [("cycle_accurate", "?"), ("context_id_bytes", "u1"), ("timestamp_64", "?"), ("timestamp_gray", "?")]
)
"""The properties the compiled packet decoder reads (one record)."""


def is_ptm(etmidr: int) -> bool:
    """Whether an ETMIDR names a PTM (its major version field, bits 11:8)."""
    return (etmidr >> 8) & 0xF == PTM_MAJOR


def _bit(value: int, n: int) -> bool:
    return bool((value >> n) & 1)


@dataclass(frozen=True)
class PtmConfig:
    """ETMCR, ETMIDR and ETMCCER of one PTM, with the stream properties they imply."""

    etmcr: int
    etmidr: int
    etmccer: int = DEFAULT_ETMCCER
    trace_id: int | None = None
    core: str | None = None

    def __post_init__(self) -> None:
        for name in ("etmcr", "etmidr", "etmccer"):
            value = getattr(self, name)
            if not 0 <= value <= MAX_REGISTER:
                raise CputraceError(f"{name.upper()}={value:#x}: expected a 32-bit register value")
        if self.trace_id is not None and not 0 <= self.trace_id <= 0x7F:
            raise CputraceError(f"trace ID {self.trace_id}: expected 0x00 to 0x7F")
        if not is_ptm(self.etmidr):
            raise CputraceError(f"ETMIDR 0x{self.etmidr:08X}: expected {PTM_ID}")
        if _bit(self.etmccer, 24):
            raise CputraceError(
                f"ETMCCER 0x{self.etmccer:08X}: bit 24 makes DMB and DSB waypoints, which this decoder "
                "does not follow (branches and ISBs are its waypoints)"
            )

    @property
    def minor_version(self) -> int:
        """0 for PFT v1.0, 1 for PFT v1.1 (ETMIDR bits 7:4)."""
        return (self.etmidr >> 4) & 0xF

    @property
    def version(self) -> str:
        return f"1.{self.minor_version}"

    @property
    def branch_broadcast(self) -> bool:
        return _bit(self.etmcr, 8)

    @property
    def cycle_accurate(self) -> bool:
        return _bit(self.etmcr, 12)

    @property
    def context_id_bytes(self) -> int:
        return (0, 1, 2, 4)[(self.etmcr >> 14) & 3]

    @property
    def timestamps(self) -> bool:
        return _bit(self.etmcr, 28)

    @property
    def return_stack(self) -> bool:
        return _bit(self.etmcr, 29)

    @property
    def vmid(self) -> bool:
        return _bit(self.etmcr, 30)

    @property
    def timestamp_64(self) -> bool:
        """64-bit timestamps (PFT v1.1 only, ETMCCER bit 29); else 48-bit."""
        return self.minor_version >= 1 and _bit(self.etmccer, 29)

    @property
    def timestamp_gray(self) -> bool:
        """Gray-coded timestamps: always in PFT v1.0, unless ETMCCER bit 28 says natural binary."""
        return self.minor_version == 0 or not _bit(self.etmccer, 28)

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

    def describe(self) -> str:
        """One line for listings: version and the options that shape the stream."""
        accurate = "cycle-accurate" if self.cycle_accurate else "not cycle-accurate"
        parts = [f"PTM (PFT v{self.version})", accurate]
        if self.context_id_bytes:
            parts.append(f"{self.context_id_bytes}-byte context ID")
        if self.timestamps:
            parts.append(f"{64 if self.timestamp_64 else 48}-bit timestamps")
        if self.vmid:
            parts.append("VMID")
        if self.return_stack:
            parts.append("return stack")
        if self.branch_broadcast:
            parts.append("branch broadcast")
        return ", ".join(parts)

    @classmethod
    def from_device(cls, device: Device, core: Device | None = None) -> PtmConfig:
        """From a snapshot trace-source device file ([regs] ETMCR, ETMIDR, ETMCCER, ETMTRACEIDR)."""
        regs = device.registers
        for name in ("ETMCR", "ETMIDR"):
            if name not in regs:
                raise CputraceError(f"{device.path}: [regs] has no {name}, which a PTM stream needs")
        for name in ("ETMCR", "ETMIDR", "ETMCCER", "ETMTRACEIDR"):
            if name in regs and not 0 <= regs[name] <= MAX_REGISTER:
                raise CputraceError(f"{device.path}: [regs] {name}={regs[name]:#x}: expected a 32-bit value")
        if not is_ptm(regs["ETMIDR"]):
            raise TraceFormatError(str(device.path), "[regs] ETMIDR", PTM_ID, f"0x{regs['ETMIDR']:08X}")
        return cls(
            regs["ETMCR"],
            regs["ETMIDR"],
            regs.get("ETMCCER", DEFAULT_ETMCCER),
            regs["ETMTRACEIDR"] & 0x7F if "ETMTRACEIDR" in regs else None,  # the ID field, bits 6:0
            core.type if core else None,
        )
