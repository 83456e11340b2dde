"""What kind of code an image holds, as its file says (the ELF machine field), and where.

A trace read against an image of another architecture walks nothing but gaps and names
nothing right; these facts let the walk and the analyses say so instead of staying silent.
Images without a machine field (raw, Intel HEX, S-records, snapshot dumps) have none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..model import Isa

_MACHINES: dict[str, tuple[str, frozenset[Isa]]] = {
    "EM_ARM": ("32-bit Arm", frozenset({Isa.A32, Isa.T32})),
    "EM_AARCH64": ("AArch64", frozenset({Isa.A64})),
    "EM_SPARC": ("SPARC", frozenset({Isa.SPARC})),
    "EM_SPARC32PLUS": ("SPARC", frozenset({Isa.SPARC})),
}


@dataclass(frozen=True, slots=True)
class Architecture:
    """The architecture an image's code is for, and which of cputrace's instruction sets it uses
    (none for architectures cputrace does not decode, such as x86-64)."""

    name: str
    isas: frozenset[Isa]

    @classmethod
    def of_elf(cls, machine: str | int) -> Architecture:
        """From ELF `e_machine` as pyelftools names it (`EM_AARCH64`; a number when unknown)."""
        if machine in _MACHINES:
            return cls(*_MACHINES[str(machine)])
        name = machine.removeprefix("EM_").replace("_", "-") if isinstance(machine, str) else str(machine)
        return cls(f"{name} (ELF machine {machine})", frozenset())

    @classmethod
    def combined(cls, architectures: Iterable[Architecture | None]) -> Architecture | None:
        """The architecture of images merged into one: None when none says, else every one's sets."""
        known = list(dict.fromkeys(a for a in architectures if a is not None))
        if len(known) <= 1:
            return known[0] if known else None
        return cls(" + ".join(a.name for a in known), frozenset().union(*(a.isas for a in known)))

    def describe_isas(self) -> str:
        return "/".join(sorted(isa.name for isa in self.isas)) or "none that cputrace decodes"


def mismatch(architecture: Architecture | None, isas: Iterable[str | Isa]) -> str | None:
    """Why an image of `architecture` cannot be the program of a trace that ran `isas` (names or
    Isa), or None when it can be or either side does not say."""
    ran = {isa if isinstance(isa, Isa) else Isa.__members__.get(str(isa)) for isa in isas} - {None}
    if architecture is None or not ran or not ran.isdisjoint(architecture.isas):
        return None
    traced = "/".join(sorted(isa.name for isa in ran))
    holds = f"{architecture.name} code ({architecture.describe_isas()})"
    return f"the image holds {holds} but the trace ran {traced}"


@dataclass(frozen=True, slots=True)
class CodeRange:
    """[start, end) of an image that holds code: an executable section, or segment."""

    start: int
    end: int
    name: str

    def __str__(self) -> str:
        return f"{self.name} [0x{self.start:x}-0x{self.end:x})"
