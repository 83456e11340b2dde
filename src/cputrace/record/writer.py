"""The Tarmac text of a recorded run: every instruction with its records, or program flow only.

Times are tick counts in `clk`: instruction n (from 1) has time n and tick n, as in Fast
Models traces. The trace opens with `0 clk E <entry> 00000001 CoreEvent_Reset` (the address
execution starts at) and, in full traces, the starting register values; it closes with
`<n> clk CADI E simulation_stopped`, n being the number of instructions run. An exception
the program takes is `E <pc> <vector> <number> <name>`: the address of the instruction that
raised it, and the vector execution continues at (value1 in the seed's syntax).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from ..export.tarmac import ISA_LETTER, instruction_record, memory_record, register_record
from ..isa import InsnInfo
from ..model import Isa
from .machine import ExceptionTaken, Write

_RESET = (1, "CoreEvent_Reset")


@dataclass(slots=True)
class Step:
    """One instruction as it ran: what it read and wrote, and where execution went next."""

    tick: int
    info: InsnInfo
    executed: bool
    mode: str
    memory: list[tuple[str, int, int, int]] = field(default_factory=list)  # op, address, size, value
    exception: ExceptionTaken | None = None


class TarmacWriter:
    """Writes records as the recorder produces them; `flow_only` keeps only FD/FI and E."""

    def __init__(self, out: TextIO, *, flow_only: bool, address_digits: int) -> None:
        self._out = out
        self.flow_only = flow_only
        self._digits = address_digits

    def start(self, entry: int, registers: Sequence[Write]) -> None:
        """The reset event at the entry point and, in a full trace, the starting registers."""
        self._event(0, entry, None, *_RESET)
        if not self.flow_only:
            self._registers(0, registers)

    def step(self, step: Step, registers: Sequence[Write], next_pc: int, next_isa: Isa, taken: bool) -> None:
        """An instruction (full trace) or the branch it took (flow trace), and its exception."""
        tick, info = step.tick, step.info
        if not self.flow_only:
            line = instruction_record(
                tick,
                info.address,
                info.opcode,
                info.size,
                info.isa.name,
                step.mode,
                step.executed,
                info.disasm,
            )
            self._out.write(f"{tick} clk {line}\n")
            for op, address, size, value in step.memory:
                self._out.write(f"{tick} clk {memory_record(op, size, address, value)}\n")
        if step.exception is not None:
            exc = step.exception
            self._event(tick, info.address, exc.vector, exc.number, exc.name)
        if self.flow_only:
            if taken:
                kind = "FD" if info.is_direct else "FI"
                letter = ISA_LETTER[next_isa.name]
                self._out.write(f"{tick} clk {kind} ({tick}) {info.address:08x} {next_pc:08x} {letter}\n")
        else:
            self._registers(tick, registers)

    def stop(self, ticks: int) -> None:
        """The closing record, timed at the number of instructions run."""
        self._out.write(f"{ticks} clk CADI E simulation_stopped\n")

    def _registers(self, tick: int, registers: Sequence[Write]) -> None:
        for name, value, width in registers:
            self._out.write(f"{tick} clk {register_record(name, value.to_bytes(width, 'little'))}\n")

    def _event(self, tick: int, value: int, value1: int | None, number: int, name: str) -> None:
        digits = self._digits
        second = "" if value1 is None else f"{value1:0{digits}x} "
        self._out.write(f"{tick} clk E {value:0{digits}x} {second}{number:08x} {name}\n")
