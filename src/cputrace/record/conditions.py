"""Whether an Arm condition passes, from the N, Z, C and V flags."""

from __future__ import annotations

from collections.abc import Callable

_TESTS: dict[str, Callable[[bool, bool, bool, bool], bool]] = {
    "eq": lambda n, z, c, v: z,
    "ne": lambda n, z, c, v: not z,
    "hs": lambda n, z, c, v: c,
    "lo": lambda n, z, c, v: not c,
    "mi": lambda n, z, c, v: n,
    "pl": lambda n, z, c, v: not n,
    "vs": lambda n, z, c, v: v,
    "vc": lambda n, z, c, v: not v,
    "hi": lambda n, z, c, v: c and not z,
    "ls": lambda n, z, c, v: not c or z,
    "ge": lambda n, z, c, v: n == v,
    "lt": lambda n, z, c, v: n != v,
    "gt": lambda n, z, c, v: not z and n == v,
    "le": lambda n, z, c, v: z or n != v,
}

_PASSES = {
    name: tuple(test(bool(f & 8), bool(f & 4), bool(f & 2), bool(f & 1)) for f in range(16))
    for name, test in _TESTS.items()
}
"""Each condition's verdict for all 16 flag combinations (index NZCV as a 4-bit number)."""


def condition_passed(condition: str | None, nzcv: int) -> bool:
    """Whether `condition` (as `isa` names it; None = always) passes with flags `nzcv` (bits 3:0)."""
    return condition is None or _PASSES[condition][nzcv]
