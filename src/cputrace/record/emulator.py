"""Running a program under unicorn, one hook call per instruction, into a Tarmac writer.

Every instruction is looked up in the program image through `isa.BlockCache` (size,
opcode, condition, branch facts); the recorder adds only what the run decides: whether the
condition passed, the memory accesses, the registers that changed, where execution went.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

import unicorn
from unicorn import Uc, UcError

from ..errors import CputraceError, UsageError
from ..image import ImageError
from ..isa import Block, BlockCache, InsnInfo, Kind
from ..model import Isa
from .aarch64 import Aarch64Machine
from .arm import ArmMachine
from .cpus import Arch, CpuModel
from .machine import CAUSES, Cause, Machine, View, Write
from .program import Program
from .registers import RegisterReader, RegisterTracker
from .semihosting import Console, Exit, Semihosting
from .writer import Step, TarmacWriter

PAGE = 0x1000
STACK_SIZE = 0x40000
"""The stack the recorder maps above the program; SP starts at its top."""

_ACCESS_KINDS = {unicorn.UC_MEM_READ_UNMAPPED: "read", unicorn.UC_MEM_WRITE_UNMAPPED: "write"}
_MAX_SKIPPED = 4  # instructions an IT block can skip
_MACHINES: dict[Arch, type[Machine]] = {Arch.ARM: ArmMachine, Arch.AARCH64: Aarch64Machine}


class StopReason(enum.StrEnum):
    EXIT = "exit"  # the program called SYS_EXIT
    LIMIT = "limit"  # the instruction limit was reached


@dataclass(frozen=True, slots=True)
class Run:
    """How a run ended."""

    instructions: int
    reason: StopReason
    exit: Exit | None


class Recorder:
    """One run of one program; `run()` drives unicorn and feeds `writer`."""

    def __init__(
        self,
        program: Program,
        cpu: CpuModel,
        out: TextIO,
        *,
        flow_only: bool,
        max_insns: int,
        console: Console,
        ram: Sequence[tuple[int, int]] = (),
    ) -> None:
        self.program = program
        self.machine = _MACHINES[program.arch](cpu)
        self.writer = TarmacWriter(out, flow_only=flow_only, address_digits=self.machine.address_digits)
        self.max_insns = max_insns
        self.uc = Uc(self.machine.uc_arch, self.machine.uc_mode)
        self.uc.ctl_set_cpu_model(cpu.unicorn_model)
        self.blocks = BlockCache(program.image)
        self.semihosting = Semihosting(self.uc.mem_read, self.machine.pointer_size, console)
        full = not flow_only
        ids = self.machine.register_ids if full else (self.machine.register_ids[self.machine.status_index],)
        self.registers = RegisterReader(self.uc, ids)
        self.status = self.machine.status_index if full else 0
        self.tracker = RegisterTracker()
        self.ticks = 0
        self.current: Step | None = None  # started, not yet written
        self.block: Block | None = None  # where `current` is in the image
        self.index = 0
        self.exit: Exit | None = None
        self.limited = False
        self.fault: str | None = None
        self._map_memory(ram)
        self._add_hooks(full)

    # -- set-up ------------------------------------------------------------------------------

    def _map_memory(self, ram: Sequence[tuple[int, int]]) -> None:
        """Map the segments (with .bss) and `ram` page-aligned, load the file bytes, and map
        a stack above everything, with SP at its top."""
        space = 1 << 8 * self.machine.pointer_size
        bits = 8 * self.machine.pointer_size
        for start, size in ram:
            if start + size > space:
                raise UsageError(f"RAM 0x{start:x}+0x{size:x} ends past the {bits}-bit address space")
        areas = [*self.program.segments, *ram]
        spans = sorted((start & -PAGE, _round_up(start + size, PAGE)) for start, size in areas)
        merged: list[list[int]] = []
        for start, end in spans:
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        stack_base = _round_up(merged[-1][1], 0x10000)
        if stack_base + STACK_SIZE > space:  # where SP cannot point
            raise UsageError(
                f"no room for the stack (0x{STACK_SIZE:x} bytes) above the program and its RAM, "
                f"which end at 0x{merged[-1][1]:x}, within the {bits}-bit address space"
            )
        merged.append([stack_base, stack_base + STACK_SIZE])
        for start, end in merged:
            self.uc.mem_map(start, end - start)
        for region in self.program.image.regions:
            self.uc.mem_write(region.start, bytes(region.data))
        self.uc.reg_write(self.machine.sp_id, stack_base + STACK_SIZE)

    def _add_hooks(self, full: bool) -> None:
        uc = self.uc
        uc.hook_add(unicorn.UC_HOOK_CODE, self._on_code)
        uc.hook_add(unicorn.UC_HOOK_INTR, self._on_interrupt)
        uc.hook_add(unicorn.UC_HOOK_INSN_INVALID, self._on_invalid)
        uc.hook_add(unicorn.UC_HOOK_MEM_UNMAPPED, self._on_unmapped)
        if full:
            uc.hook_add(unicorn.UC_HOOK_MEM_READ | unicorn.UC_HOOK_MEM_WRITE, self._on_memory)

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> Run:
        """Run from the entry point until exit or the instruction limit; CputraceError on a fault.

        The trace is complete up to a fault (including the instruction that faulted).
        """
        program, machine = self.program, self.machine
        machine.set_pc(self.uc, program.entry, program.entry_isa)  # the state too: CPSR.T for T32
        values = self.registers.read()
        view = machine.view(values[self.status])
        full = not self.writer.flow_only
        self.writer.start(
            program.entry, self.tracker.baseline(view.names, values, machine.widths) if full else ()
        )
        end = (1 << (8 * machine.pointer_size)) - 1  # never an instruction address
        failure: str | None = None
        try:
            self.uc.emu_start(machine.start_address(program.entry, program.entry_isa), end)
        except UcError as exc:
            failure = self.fault or str(exc)
        except CputraceError as exc:  # raised in a hook
            failure = str(exc)
        if self.current is not None:
            values = self.registers.read()
            self._finish(values, machine.view(values[self.status]), self.uc.reg_read(machine.pc_id))
        self.writer.stop(self.ticks)
        if failure is None and self.exit is None and not self.limited:
            failure = "unicorn ended the emulation (the program halted without a semihosting exit)"
        if failure is not None:
            pc = self.uc.reg_read(machine.pc_id)
            raise CputraceError(
                f"{program.path}: stopped at pc 0x{pc:x} after {self.ticks:,} instructions: {failure}"
            )
        if self.exit is not None:
            return Run(self.ticks, StopReason.EXIT, self.exit)
        return Run(self.ticks, StopReason.LIMIT, None)

    # -- hooks -------------------------------------------------------------------------------

    def _on_code(self, uc: Uc, address: int, size: int, _data: object) -> None:
        current = self.current
        if current is not None and address == current.info.address + 2 and current.info.size == 4:
            return  # pre-Thumb-2 cores run a 32-bit Thumb BL as two halves
        values = self.registers.read()
        status = values[self.status]
        view = self.machine.view(status)
        if current is not None:
            taken = self._finish(values, view, address)
            if not taken and current.exception is None and address != current.info.next_address:
                self._skip_to(address, view, status >> 28)
        if self.ticks >= self.max_insns:
            self.limited = True
            uc.emu_stop()
            return
        info = self._locate(address, view.isa)
        self.ticks += 1
        self.current = Step(self.ticks, info, self.machine.executes(info, status >> 28), view.mode)

    def _on_memory(self, uc: Uc, access: int, address: int, size: int, value: int, _data: object) -> None:
        if access == unicorn.UC_MEM_READ:
            value = int.from_bytes(uc.mem_read(address, size), "little")  # not yet read: still in memory
            self.current.memory.append(("R", address, size, value))
        else:
            self.current.memory.append(("W", address, size, value & ((1 << (8 * size)) - 1)))

    def _on_interrupt(self, uc: Uc, number: int, _data: object) -> None:
        cause = CAUSES.get(number)
        if cause is None:
            raise CputraceError(f"unicorn raised exception {number}, which the recorder does not model")
        self._exception(cause)

    def _on_invalid(self, uc: Uc, _data: object) -> bool:
        self._exception(Cause.UNDEFINED)
        return True

    def _on_unmapped(self, uc: Uc, access: int, address: int, size: int, value: int, _data: object) -> bool:
        kind = _ACCESS_KINDS.get(access, "fetch")
        self.fault = f"{kind} of {size} bytes at unmapped address 0x{address:x}"
        return False

    # -- per instruction ---------------------------------------------------------------------

    def _finish(self, values: list[int], view: View, next_pc: int) -> bool:
        """Write the current instruction now that its effects are known; whether it branched."""
        step = self.current
        info = step.info
        registers: Sequence[Write] = ()
        if not self.writer.flow_only:
            link = self.machine.link_index if info.kind is Kind.CALL and step.executed else None
            registers = self.tracker.changes(view.names, values, self.machine.widths, link)
        taken = (
            info.is_branch
            and step.executed
            and step.exception is None
            and (next_pc != info.next_address or not info.is_conditional)
        )
        self.writer.step(step, registers, next_pc, view.isa, taken)
        self.current = None
        return taken

    def _skip_to(self, address: int, view: View, nzcv: int) -> None:
        """Write the instructions unicorn skipped without a hook call: the condition-failed
        ones of a T32 IT block. Anything else means the recorder lost track of the flow."""
        for _ in range(_MAX_SKIPPED):
            if self.ticks >= self.max_insns:
                return
            info = self._locate(self.block.insns[self.index].next_address, view.isa)
            if self.machine.executes(info, nzcv):
                break
            self.ticks += 1
            self.writer.step(Step(self.ticks, info, False, view.mode), (), info.next_address, view.isa, False)
            if info.next_address == address:
                return
        raise CputraceError(f"execution reached 0x{address:x}, which the program image does not lead to")

    def _exception(self, cause: Cause) -> None:
        """Serve a semihosting call, or take the exception as the architecture does."""
        step = self.current
        info = step.info
        if self.machine.is_semihosting(info):
            self._semihost(info)
            return
        step.exception = self.machine.take_exception(self.uc, cause, info)
        if not self.writer.flow_only:
            for name, value, width in step.exception.writes:
                self.tracker.note(name, value, width)

    def _semihost(self, info: InsnInfo) -> None:
        op, param = self.machine.semihosting_call(self.uc)
        try:
            outcome = self.semihosting.call(op, param)
        except CputraceError as exc:
            raise CputraceError(f"0x{info.address:x}: {exc}") from None
        except UcError as exc:
            raise CputraceError(
                f"0x{info.address:x}: semihosting operation 0x{op:x} names unmapped memory ({exc})"
            ) from None
        if outcome.exit is not None:
            self.exit = outcome.exit
            self.uc.emu_stop()
            return
        if outcome.value is not None:
            self.machine.semihosting_return(self.uc, outcome.value)
        self.machine.set_pc(self.uc, info.next_address, info.isa)

    def _locate(self, address: int, isa: Isa) -> InsnInfo:
        """The instruction at `address`: the next one of the current block, or a new block's first."""
        block, index = self.block, self.index + 1
        if (
            block is None
            or block.isa is not isa
            or index >= len(block)
            or block.insns[index].address != address
        ):
            try:
                block = self.blocks.block_at(address, isa)
            except ImageError as exc:
                raise CputraceError(f"cannot record the instruction at 0x{address:x}: {exc}") from None
            index = 0
        self.block, self.index = block, index
        return block.insns[index]


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step
