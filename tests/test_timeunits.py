"""Units of trace time: the same run timed in nanoseconds and in femtoseconds gives the same
timelines, a million times shorter (the SI prefixes are the independent answer)."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from cputrace.cli import cli
from cputrace.formats.tarmac.timescale import TimeScale
from cputrace.timeunits import SECOND_EXPONENTS, ratio

QUICKSORT = Path(__file__).resolve().parent.parent / "examples" / "quicksort.tarmac"


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[tuple[str, str], dict]:
    """quicksort's timeline and speedscope profile, its `clk` times read as ns and as fs."""
    root = tmp_path_factory.mktemp("units")
    text = QUICKSORT.read_text()
    made = {}
    for unit in ("ns", "fs"):
        trace = root / f"{unit}.tarmac"
        trace.write_text(re.sub(r"^(\d+) clk ", rf"\1 {unit} ", text, flags=re.M))
        store = root / f"{unit}.ctrace"
        result = CliRunner().invoke(cli, ["ingest", str(trace), "--format", "tarmac", "-o", str(store)])
        assert result.exit_code == 0, result.output
        assert json.loads((store / "manifest.json").read_text())["time"]["unit"] == unit
        for to in ("chrome", "speedscope"):
            out = root / f"{unit}.{to}.json"
            result = CliRunner().invoke(cli, ["export", str(store), "--to", to, "-o", str(out)])
            assert result.exit_code == 0, result.output
            made[unit, to] = json.loads(out.read_text())
    return made


def test_femtoseconds_on_a_chrome_timeline(exported):
    ns, fs = exported["ns", "chrome"]["traceEvents"], exported["fs", "chrome"]["traceEvents"]
    timed = [(a, b) for a, b in zip(ns, fs, strict=True) if "ts" in a]
    assert len(timed) > 10 and all(a["ts"] > 0 for a, _ in timed)
    for a, b in timed:
        assert b["ts"] == pytest.approx(a["ts"] * 1e-6)
        assert b.get("dur", 0) == pytest.approx(a.get("dur", 0) * 1e-6)


def test_femtoseconds_in_a_speedscope_profile(exported):
    ns, fs = exported["ns", "speedscope"]["profiles"][0], exported["fs", "speedscope"]["profiles"][0]
    assert ns["unit"] == fs["unit"] == "nanoseconds"
    assert fs["endValue"] == pytest.approx(ns["endValue"] * 1e-6)
    ats = [(a["at"], b["at"]) for a, b in zip(ns["events"], fs["events"], strict=True)]
    assert len(ats) > 10
    assert all(b == pytest.approx(a * 1e-6) for a, b in ats)


def test_ratios_follow_the_si_prefixes():
    prefixes = {"s": 1, "ms": Fraction(1, 10**3), "us": Fraction(1, 10**6), "ns": Fraction(1, 10**9),
                "ps": Fraction(1, 10**12), "fs": Fraction(1, 10**15)}  # fmt: skip
    assert set(SECOND_EXPONENTS) == set(prefixes)
    for unit in prefixes:
        for to in prefixes:
            assert ratio(unit, to) == prefixes[unit] / prefixes[to]


@pytest.mark.parametrize(
    ("times", "unit", "stored"),
    [
        ([("5", "ns"), ("7", "fs")], "ns", [5, 0]),  # the first unit is kept; finer times round down
        ([("2", "us"), ("3", "ns")], "ps", [2_000_000, 3_000]),  # coarser than ns: picoseconds
        ([("1.5", "ns"), ("2", "ns")], "ps", [1_500, 2_000]),  # a fraction: picoseconds
        ([("4", "clk"), ("9", "clk")], "clk", [4, 9]),  # counting units are not converted
    ],
)
def test_the_stored_unit_of_tarmac_times(times, unit, stored):
    scale = TimeScale()
    assert [scale.convert(number, name) for number, name in times] == stored
    assert scale.unit == unit
