"""The registers that shape an ETMv4 trace unit's instruction trace stream (Arm IHI 0064,
chapter 7: TRCCONFIGR, TRCTRACEIDR and the ID registers TRCIDR0, 1, 2, 8-13), checked as they
are read, and the properties they imply.

A snapshot's device file (`type=ETM4`, `ETM4.1`, ... `ETM4.4`) gives them as
`NAME(0xOFFSET)=value` or `NAME(id:0xN)=value`; its core's type tells the A/R profile from the M
profile (`Cortex-M...`), which no trace unit register gives.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, Self

import numpy as np

from ...coresight.registers import MAX_REGISTER, REGISTER, bit, check_register
from ...coresight.snapshot import Device
from ...errors import CputraceError, TraceFormatError

ETMV4_MAJOR = 4  # TRCIDR1 bits 11:8 of an ETMv4 trace unit
PROTOCOLS = frozenset({"ETM4"})
"""Device types of ETMv4 trace units without their minor version, as snapshots spell them
(ETM4, ETM4.1, ETM4.2, ETM4.4...)."""

CONFIG = np.dtype(
    [
        ("context_id_bytes", "u1"), ("vmid_bytes", "u1"), ("cycle_count_bits", "u1"),
        ("commit_in_cycle_count", "?"), ("max_speculation", "<i8"), ("q_elements", "?"),
        ("conditional", "?"), ("data_sync_markers", "?"), ("ignore_packets", "?"),
        ("function_return", "?"), ("m_profile", "?"),
    ]
)  # fmt: skip
"""The properties the compiled packet decoder reads (one record)."""

CONTEXT_ID_SIZES = {0: 0, 4: 4}  # TRCIDR2.CIDSIZE -> bytes
VMID_SIZES = {0: 0, 1: 1, 2: 2, 4: 4}  # TRCIDR2.VMIDSIZE -> bytes
ADDRESS_SIZES = {4: 32, 8: 64}  # TRCIDR2.IASIZE -> bits
TIMESTAMP_SIZES = {0: 0, 6: 48, 8: 64}  # TRCIDR0.TSSIZE -> bits (0: no global timestamps)
MAX_CYCLE_COUNT_SIZE = 8  # TRCIDR2.CCSIZE: counters of 12 to 20 bits


@dataclass(frozen=True)
class Etmv4Config:
    """One ETMv4 trace unit's registers, its trace ID and its core's type."""

    trcconfigr: int
    trcidr0: int
    trcidr1: int
    trcidr2: int
    trcidr8: int = 0  # MAXSPEC: the most P0 elements the trace may leave uncommitted
    trace_id: int | None = None
    core: str | None = None

    REQUIRED: ClassVar[tuple[str, ...]] = ("TRCCONFIGR", "TRCIDR0", "TRCIDR1", "TRCIDR2")
    """The registers a snapshot device file must give (TRCIDR8 defaults to 0)."""
    STREAM: ClassVar[str] = "an ETMv4 stream"
    ID: ClassVar[str] = f"an ETMv4 TRCIDR1 (major version field, bits 11:8, {ETMV4_MAJOR})"

    def __post_init__(self) -> None:
        for name in self._register_names():
            check_register(getattr(self, name), name.upper())
        if self.trace_id is not None and not 0 <= self.trace_id <= 0x7F:
            raise CputraceError(f"trace ID {self.trace_id}: expected 0x00 to 0x7F")
        if self.major_version != ETMV4_MAJOR:
            raise CputraceError(f"TRCIDR1 0x{self.trcidr1:08X}: expected {self.ID}")
        for name, value, sizes in (
            ("TRCIDR2.CIDSIZE (bits 9:5)", (self.trcidr2 >> 5) & 0x1F, CONTEXT_ID_SIZES),
            ("TRCIDR2.VMIDSIZE (bits 14:10)", (self.trcidr2 >> 10) & 0x1F, VMID_SIZES),
            ("TRCIDR2.IASIZE (bits 4:0)", self.trcidr2 & 0x1F, ADDRESS_SIZES),
            ("TRCIDR0.TSSIZE (bits 28:24)", (self.trcidr0 >> 24) & 0x1F, TIMESTAMP_SIZES),
        ):
            if value not in sizes:
                allowed = ", ".join(str(v) for v in sizes)
                raise CputraceError(f"{name} is {value}: expected one of {allowed}")
        if (self.trcidr2 >> 25) & 0xF > MAX_CYCLE_COUNT_SIZE:
            size = (self.trcidr2 >> 25) & 0xF
            expected = f"expected 0 to {MAX_CYCLE_COUNT_SIZE}"
            raise CputraceError(f"TRCIDR2.CCSIZE (bits 28:25) is {size}: {expected}")

    @classmethod
    def _register_names(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.name.startswith("trc")]

    @property
    def major_version(self) -> int:
        """TRCIDR1.TRCARCHMAJ (bits 11:8)."""
        return (self.trcidr1 >> 8) & 0xF

    @property
    def minor_version(self) -> int:
        """TRCIDR1.TRCARCHMIN (bits 7:4)."""
        return (self.trcidr1 >> 4) & 0xF

    @property
    def title(self) -> str:
        return f"ETMv{self.major_version}.{self.minor_version}"

    @property
    def m_profile(self) -> bool:
        """An M-profile core (its exception numbers and Armv8-M function return packets)."""
        return (self.core or "").upper().startswith("CORTEX-M")

    @property
    def branch_broadcast(self) -> bool:
        return bit(self.trcconfigr, 3)

    @property
    def cycle_counting(self) -> bool:
        return bit(self.trcconfigr, 4)

    @property
    def traces_context_id(self) -> bool:
        return bit(self.trcconfigr, 6)

    @property
    def traces_vmid(self) -> bool:
        return bit(self.trcconfigr, 7)

    @property
    def conditional(self) -> bool:
        """Conditional instruction tracing: TRCCONFIGR.COND (bits 10:8) on a trace unit that has
        it (TRCIDR0.TRCCOND, bit 6)."""
        return bit(self.trcidr0, 6) and (self.trcconfigr >> 8) & 7 != 0

    @property
    def timestamps(self) -> bool:
        return bit(self.trcconfigr, 11)

    @property
    def return_stack(self) -> bool:
        return bit(self.trcconfigr, 12)

    @property
    def q_elements(self) -> bool:
        """Q elements: TRCCONFIGR.QE (bits 14:13) on a trace unit that supports them
        (TRCIDR0.QSUPP, bits 16:15)."""
        return (self.trcidr0 >> 15) & 3 != 0 and (self.trcconfigr >> 13) & 3 != 0

    @property
    def data_trace(self) -> bool:
        """Data address or value tracing (TRCCONFIGR.DA, DV: bits 16, 17)."""
        return bit(self.trcconfigr, 16) or bit(self.trcconfigr, 17)

    @property
    def context_id_bytes(self) -> int:
        """Bytes of a context ID in context packets (TRCIDR2.CIDSIZE)."""
        return CONTEXT_ID_SIZES[(self.trcidr2 >> 5) & 0x1F]

    @property
    def vmid_bytes(self) -> int:
        """Bytes of a VMID in context packets (TRCIDR2.VMIDSIZE)."""
        return VMID_SIZES[(self.trcidr2 >> 10) & 0x1F]

    @property
    def address_bits(self) -> int:
        """The instruction address size (TRCIDR2.IASIZE)."""
        return ADDRESS_SIZES[self.trcidr2 & 0x1F]

    @property
    def timestamp_bits(self) -> int:
        """The global timestamp size (TRCIDR0.TSSIZE; 0: none)."""
        return TIMESTAMP_SIZES[(self.trcidr0 >> 24) & 0x1F]

    @property
    def cycle_count_bits(self) -> int:
        """The cycle counter's size (TRCIDR2.CCSIZE: 12 bits and up)."""
        return 12 + ((self.trcidr2 >> 25) & 0xF)

    @property
    def commit_in_cycle_count(self) -> bool:
        """Cycle count packets carry a commit count (TRCIDR0.COMMOPT, bit 29, clear)."""
        return not bit(self.trcidr0, 29)

    @property
    def max_speculation(self) -> int:
        """TRCIDR8.MAXSPEC: the most P0 elements left uncommitted."""
        return self.trcidr8

    def describe(self) -> str:
        """One line for listings: version and the options that shape the stream."""
        profile = "M profile" if self.m_profile else "A/R profile"
        parts = [self.title, profile, f"{self.address_bits}-bit addresses"]
        named = (
            ("cycle counting", self.cycle_counting), ("context ID", self.traces_context_id),
            ("VMID", self.traces_vmid), ("timestamps", self.timestamps), ("return stack", self.return_stack),
            ("branch broadcast", self.branch_broadcast), ("conditional trace", self.conditional),
            ("Q elements", self.q_elements), ("data trace", self.data_trace),
        )  # fmt: skip
        return ", ".join(parts + [name for name, on in named if on])

    def as_record(self) -> np.ndarray:
        """The properties the compiled decoder needs, as one CONFIG record."""
        record = np.zeros(1, CONFIG)
        record["context_id_bytes"] = self.context_id_bytes
        record["vmid_bytes"] = self.vmid_bytes
        record["cycle_count_bits"] = self.cycle_count_bits
        record["commit_in_cycle_count"] = self.commit_in_cycle_count
        record["max_speculation"] = self.max_speculation
        record["q_elements"] = self.q_elements
        record["conditional"] = self.conditional
        record["data_sync_markers"] = self.data_trace
        record["ignore_packets"] = (self.major_version, self.minor_version) >= (4, 3)
        record["function_return"] = self.m_profile and (self.major_version, self.minor_version) >= (4, 2)
        record["m_profile"] = self.m_profile
        return record

    @classmethod
    def from_device(cls, device: Device, core: Device | None = None) -> Self:
        """From a snapshot trace-source device file ([regs] TRCCONFIGR, TRCTRACEIDR, TRCIDR0...)."""
        regs = device.registers
        for name in cls.REQUIRED:
            if name not in regs:
                raise CputraceError(f"{device.path}: [regs] has no {name}, which {cls.STREAM} needs")
        for name in (*(n.upper() for n in cls._register_names()), "TRCTRACEIDR"):
            if name in regs and not 0 <= regs[name] <= MAX_REGISTER:
                raise TraceFormatError(str(device.path), f"[regs] {name}", REGISTER, f"0x{regs[name]:X}")
        if ((regs["TRCIDR1"] >> 8) & 0xF) != ETMV4_MAJOR:
            raise TraceFormatError(str(device.path), "[regs] TRCIDR1", cls.ID, f"0x{regs['TRCIDR1']:08X}")
        given = {name: regs[name.upper()] for name in cls._register_names() if name.upper() in regs}
        try:
            return cls(
                **given,
                trace_id=regs["TRCTRACEIDR"] & 0x7F if "TRCTRACEIDR" in regs else None,  # TRACEID, bits 6:0
                core=core.type if core else None,
            )
        except CputraceError as e:
            raise CputraceError(f"{device.path}: [regs] {e}") from None
