"""The unit a Tarmac trace's times are stored in, and the conversion of every line's time to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ...timeunits import is_real, ratio

MAX_TIME = 2**63 - 1
"""The largest time the store holds (`time` is int64)."""
MAX_WHOLE_DIGITS = 20
MAX_DECIMALS = 30
"""Longer numbers are out of range whatever the unit (and Python's int() refuses 4,300 digits)."""


@dataclass
class TimeScale:
    """Chooses the unit `time` is stored in and converts every line's time to it.

    The unit is the first one the input uses, except that microsecond (or coarser) and
    fractional times are stored in picoseconds so they stay integers.
    """

    unit: str | None = None
    _factors: dict[str, Fraction] = field(default_factory=dict)

    def decide(self, unit: str, fractional: bool) -> None:
        if self.unit is None:
            self.unit = "ps" if is_real(unit) and (fractional or ratio(unit, "ns") > 1) else unit

    def factor(self, unit: str) -> Fraction:
        if unit not in self._factors:
            if is_real(self.unit) and is_real(unit):
                self._factors[unit] = ratio(unit, self.unit)
            else:
                self._factors[unit] = Fraction(1)
        return self._factors[unit]

    def limit(self, unit: str) -> int:
        """The largest whole time in `unit` that converts without leaving 64 bits."""
        return MAX_TIME // self.factor(unit).numerator

    def out_of_range(self, unit: str | None) -> str:
        """What a time that `convert` refuses was expected to be."""
        return f"a time that fits the store's 64-bit time in {self.unit or unit or 'its unit'}"

    def convert(self, number: str, unit: str | None) -> int | None:
        """A decimal time (`12`, `1166.141`) in `unit`, in the stored unit; None if out of range."""
        whole, _, decimals = number.partition(".")
        whole = whole.lstrip("0")
        if len(whole) > MAX_WHOLE_DIGITS or len(decimals) > MAX_DECIMALS:
            return None
        scale = 10 ** len(decimals)
        time = Fraction(int(whole or "0") * scale + int(decimals or "0"), scale)
        if unit is not None:
            self.decide(unit, bool(decimals))
            time *= self.factor(unit)
        return int(time) if int(time) <= MAX_TIME else None
