"""The units of trace time: real time, each unit a power of ten of a second, and units that
count (cycles, ticks), which nothing converts.

Inputs print times in either kind; a store keeps one unit (the manifest's `time.unit`), and
the exports that need real time (timelines, VCD, speedscope) convert from it here.
"""

from __future__ import annotations

from fractions import Fraction

SECOND_EXPONENTS = {"s": 0, "ms": -3, "us": -6, "ns": -9, "ps": -12, "fs": -15}
"""Real time units: one of each is 10**exponent seconds."""

COUNTING_UNITS = ("clk", "cyc", "tic", "cs")
"""Units Tarmac producers print that count clock cycles or ticks rather than seconds."""


def is_real(unit: str | None) -> bool:
    return unit in SECOND_EXPONENTS


def ratio(unit: str, to: str) -> Fraction:
    """How many `to` one `unit` is, both real time units (ratio("us", "ns") == 1000)."""
    return Fraction(10) ** (SECOND_EXPONENTS[unit] - SECOND_EXPONENTS[to])
