"""What the benchmark scripts share: generated traces, and child processes timed and sized."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import gen_armulator
from gen_tarmac import generate

OUT = Path(__file__).parent / "out"


class Measured(NamedTuple):
    seconds: float  # wall clock
    cpu_seconds: float  # user + system: steadier than wall time on a machine others load
    rss: int  # peak resident bytes


def run_measured(cmd: list[str]) -> Measured:
    """Run one child process to the end; exits with its stderr if it fails."""
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{child.stderr.read().decode()}")
    return Measured(elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024)


def generated_trace(lines: int, format: str = "tarmac") -> Path:
    """benchmarks/out/bench-LINES.tarmac from gen_tarmac.py (`format` "armulator":
    bench-LINES.trc from gen_armulator.py), generated once."""
    OUT.mkdir(exist_ok=True)
    trace = OUT / (f"bench-{lines}.tarmac" if format == "tarmac" else f"bench-{lines}.trc")
    if not trace.exists():
        with open(trace, "w") as f:
            (generate if format == "tarmac" else gen_armulator.generate)(lines, f)
    return trace
