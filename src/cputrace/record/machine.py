"""What the recorder needs from each architecture: registers, modes, semihosting, exceptions."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass

from unicorn import Uc

from ..isa import InsnInfo
from ..model import Isa
from .cpus import CpuModel


class Cause(enum.Enum):
    """Why unicorn stopped an instruction to raise an exception."""

    SUPERVISOR_CALL = "svc"
    UNDEFINED = "undefined"
    BREAKPOINT = "breakpoint"


CAUSES = {1: Cause.UNDEFINED, 2: Cause.SUPERVISOR_CALL, 7: Cause.BREAKPOINT}
"""unicorn's interrupt numbers (QEMU's EXCP_UDEF, EXCP_SWI, EXCP_BKPT), AArch32 and AArch64 alike."""

Write = tuple[str, int, int]
"""A register write: name, value, width in bytes."""


@dataclass(frozen=True, slots=True)
class View:
    """What the status register says: the names the traced registers have in the current
    mode (None: not traced there), the mode as Tarmac prints it, and the instruction set."""

    names: tuple[str | None, ...]
    mode: str
    isa: Isa


@dataclass(frozen=True, slots=True)
class ExceptionTaken:
    """An exception entry the recorder performed: the Tarmac event and the registers it set."""

    number: int  # Fast Models event number (CoreEvent_*)
    name: str
    vector: int  # where execution continues
    writes: tuple[Write, ...]


class Machine(ABC):
    """One architecture's registers, state, semihosting convention and exception entry.

    unicorn reports exceptions to a hook instead of taking them (its QEMU core would, but
    unicorn skips that step when a hook is installed), so `take_exception` performs the
    architectural entry itself: mode, return address, saved status, vector.
    """

    uc_arch: int
    uc_mode: int
    register_ids: tuple[int, ...]  # traced registers, read after every instruction
    widths: tuple[int, ...]  # their widths in bytes
    status_index: int  # where the status register (CPSR, PSTATE) is in `register_ids`
    link_index: int  # where the link register (r14, X30) is
    view_bits: int  # the status register bits that decide the view (mode, state)
    pc_id: int
    sp_id: int
    address_digits: int  # hex digits of an address in Tarmac event records
    pointer_size: int  # bytes of a field in a semihosting parameter block

    def __init__(self, cpu: CpuModel) -> None:
        self.cpu = cpu
        self._views: dict[int, View] = {}

    def view(self, status: int) -> View:
        """Register names, mode and instruction set for this status register value."""
        key = status & self.view_bits
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = self._make_view(key)
        return view

    @abstractmethod
    def _make_view(self, bits: int) -> View:
        """The view for the status register bits `view_bits` selects."""

    @abstractmethod
    def executes(self, info: InsnInfo, nzcv: int) -> bool:
        """Whether `info` passes its condition (Tarmac `IT`) or is skipped (`IS`)."""

    def start_address(self, address: int, isa: Isa) -> int:
        """The address unicorn starts at for an instruction of `isa` (AArch32: bit 0 = Thumb)."""
        return address

    def set_pc(self, uc: Uc, address: int, isa: Isa) -> None:
        uc.reg_write(self.pc_id, self.start_address(address, isa))

    @abstractmethod
    def is_semihosting(self, info: InsnInfo) -> bool:
        """Whether `info` is this architecture's semihosting trap."""

    @abstractmethod
    def semihosting_call(self, uc: Uc) -> tuple[int, int]:
        """The semihosting operation number and its parameter register."""

    @abstractmethod
    def semihosting_return(self, uc: Uc, value: int) -> None:
        """Put a semihosting result where the program expects it."""

    @abstractmethod
    def take_exception(self, uc: Uc, cause: Cause, info: InsnInfo) -> ExceptionTaken:
        """Enter the exception `info` raised; the pc is left at the vector."""
