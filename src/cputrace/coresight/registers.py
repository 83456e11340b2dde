"""The ETMCR, ETMIDR and ETMCCER registers of a program-flow trace macrocell of the ETM
architecture (an ETMv3 or a PTM), checked as they are read, with the stream properties the
two read from the same bits; each protocol's config adds its own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Self

from ..errors import CputraceError, TraceFormatError
from .snapshot import Device

MAX_REGISTER = 0xFFFFFFFF  # the macrocell's registers are 32 bits
REGISTER = f"a 32-bit register value (0 to 0x{MAX_REGISTER:X})"
"""What a register value must be, as error messages say it."""
REGISTER_NAMES = ("ETMCR", "ETMIDR", "ETMCCER")


def major_version(etmidr: int) -> int:
    """ETMIDR's major version field (bits 11:8): 2 for an ETMv3, 3 for a PTM."""
    return (etmidr >> 8) & 0xF


def bit(value: int, n: int) -> bool:
    return bool((value >> n) & 1)


def check_register(value: int, name: str, where: str = "") -> None:
    """Refuse a register value that does not fit 32 bits, naming it (after `where`)."""
    if not 0 <= value <= MAX_REGISTER:
        raise CputraceError(f"{where}{name}={value:#x}: expected {REGISTER}")


@dataclass(frozen=True)
class TraceRegisters(ABC):
    """ETMCR, ETMIDR and ETMCCER of one macrocell, its trace ID and its core's type; a
    subclass names the major version it decodes (MAJOR) and adds the properties only it has."""

    etmcr: int
    etmidr: int
    etmccer: int
    trace_id: int | None = None
    core: str | None = None

    MAJOR: ClassVar[int]
    """ETMIDR's major version field of the macrocells this config describes."""
    ID: ClassVar[str]
    """What an ETMIDR must be for this decoder, as error messages say it."""
    STREAM: ClassVar[str]
    """The stream the registers shape, as error messages name it ("an ETMv3 stream")."""
    REQUIRED: ClassVar[tuple[str, ...]]
    """The registers a snapshot device file must give (the others have defaults)."""

    def __post_init__(self) -> None:
        for name in REGISTER_NAMES:
            check_register(getattr(self, name.lower()), name)
        if self.trace_id is not None and not 0 <= self.trace_id <= 0x7F:
            raise CputraceError(f"trace ID {self.trace_id}: expected 0x00 to 0x7F")
        if major_version(self.etmidr) != self.MAJOR:
            raise CputraceError(f"ETMIDR 0x{self.etmidr:08X}: expected {self.ID}")

    @property
    def minor_version(self) -> int:
        """ETMIDR bits 7:4."""
        return (self.etmidr >> 4) & 0xF

    @property
    def cycle_accurate(self) -> bool:
        return bit(self.etmcr, 12)

    @property
    def context_id_bytes(self) -> int:
        return (0, 1, 2, 4)[(self.etmcr >> 14) & 3]

    @property
    def timestamps(self) -> bool:
        return bit(self.etmcr, 28)

    @property
    def vmid(self) -> bool:
        return bit(self.etmcr, 30)

    @property
    @abstractmethod
    def title(self) -> str:
        """The macrocell and its version, as listings name it."""

    @property
    @abstractmethod
    def timestamp_64(self) -> bool:
        """Whether timestamps are 64 bits wide (else 48)."""

    def traced(self) -> list[str]:
        """What the stream traces besides instructions, for `describe`."""
        return []

    def options(self) -> list[str]:
        """The protocol's own options that are on, for `describe`."""
        return []

    def describe(self) -> str:
        """One line for listings: version and the options that shape the stream."""
        parts = [self.title, "cycle-accurate" if self.cycle_accurate else "not cycle-accurate"]
        if self.context_id_bytes:
            parts.append(f"{self.context_id_bytes}-byte context ID")
        parts += self.traced()
        if self.timestamps:
            parts.append(f"{64 if self.timestamp_64 else 48}-bit timestamps")
        if self.vmid:
            parts.append("VMID")
        return ", ".join(parts + self.options())

    @classmethod
    def from_device(cls, device: Device, core: Device | None = None) -> Self:
        """From a snapshot trace-source device file ([regs] ETMCR, ETMIDR, ETMCCER, ETMTRACEIDR)."""
        regs = device.registers
        for name in cls.REQUIRED:
            if name not in regs:
                raise CputraceError(f"{device.path}: [regs] has no {name}, which {cls.STREAM} needs")
        for name in (*REGISTER_NAMES, "ETMTRACEIDR"):
            if name in regs:
                check_register(regs[name], name, f"{device.path}: [regs] ")
        if "ETMIDR" in regs and major_version(regs["ETMIDR"]) != cls.MAJOR:
            raise TraceFormatError(str(device.path), "[regs] ETMIDR", cls.ID, f"0x{regs['ETMIDR']:08X}")
        given = {name.lower(): regs[name] for name in REGISTER_NAMES if name in regs}  # the others: defaults
        return cls(
            **given,
            trace_id=regs["ETMTRACEIDR"] & 0x7F if "ETMTRACEIDR" in regs else None,  # the ID field, bits 6:0
            core=core.type if core else None,
        )
