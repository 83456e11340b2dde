"""Arm semihosting: the calls a bare-metal C program needs to print and to stop.

Supported operations: SYS_WRITEC, SYS_WRITE0, SYS_WRITE (handles 1 = stdout, 2 = stderr),
SYS_EXIT and SYS_EXIT_EXTENDED. Any other operation stops the run with an error naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import CputraceError

SYS_WRITEC = 0x03
SYS_WRITE0 = 0x04
SYS_WRITE = 0x05
SYS_EXIT = 0x18
SYS_EXIT_EXTENDED = 0x20
APPLICATION_EXIT = 0x20026  # ADP_Stopped_ApplicationExit
_STDOUT, _STDERR = 1, 2
_CHUNK = 64

Console = Callable[[int, bytes], None]
"""Receives program output: (1 for stdout or 2 for stderr, bytes)."""


@dataclass(frozen=True, slots=True)
class Exit:
    """How the program stopped: its exit status, and the semihosting reason code."""

    status: int
    reason: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a call returns to the program (None: the register is left as it was), or an exit."""

    value: int | None = None
    exit: Exit | None = None


class Semihosting:
    """Carries out semihosting calls against the emulator's memory."""

    def __init__(self, read: Callable[[int, int], bytes], pointer_size: int, console: Console) -> None:
        self._read = read
        self._pointer = pointer_size
        self._console = console

    def call(self, op: int, param: int) -> Outcome:
        if op == SYS_WRITEC:
            self._console(_STDOUT, self._read(param, 1))
            return Outcome()
        if op == SYS_WRITE0:
            self._console(_STDOUT, self._string(param))
            return Outcome()
        if op == SYS_WRITE:
            handle, address, length = self._fields(param, 3)
            if handle not in (_STDOUT, _STDERR):
                return Outcome(length)  # nothing written
            self._console(handle, self._read(address, length))
            return Outcome(0)
        if op == SYS_EXIT and self._pointer == 4:  # AArch32 passes the reason itself
            return Outcome(exit=Exit(0 if param == APPLICATION_EXIT else 1, param))
        if op in (SYS_EXIT, SYS_EXIT_EXTENDED):
            reason, subcode = self._fields(param, 2)
            return Outcome(exit=Exit(subcode if reason == APPLICATION_EXIT else 1, reason))
        raise CputraceError(f"semihosting operation 0x{op:x} is not supported")

    def _fields(self, address: int, count: int) -> list[int]:
        data = self._read(address, count * self._pointer)
        size = self._pointer
        return [int.from_bytes(data[i : i + size], "little") for i in range(0, len(data), size)]

    def _string(self, address: int) -> bytes:
        text = b""
        while True:
            at = address + len(text)
            chunk = self._read(at, _CHUNK - at % _CHUNK)  # aligned: never crosses into a gap
            end = chunk.find(0)
            if end >= 0:
                return text + chunk[:end]
            text += chunk
