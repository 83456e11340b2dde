"""The short fuzz campaign: about a minute of mutated seeds for every decoder, in both modes,
with no crash, hang, memory blow-up or store that breaks the model (fuzz/README.md).

The campaign runs as its own process (`python -m fuzz`), as a developer would run it: it forks
its workers from a process that holds nothing of pytest's. A failure prints the campaign's
table: each finding with its place in cputrace and the command that replays it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fuzz.case import ERROR, FAILURES, OK
from fuzz.targets import FAMILIES

ROOT = Path(__file__).resolve().parents[1]
INPUTS = 800
"""100 inputs per family (they take turns), each ingested in both modes: about a minute. A
count, not a time, so every machine runs the same inputs."""
SECONDS = 900  # a cap far above the minute: a slower machine still runs every input


def test_a_short_campaign_finds_no_crash_hang_or_blowup(tmp_path: Path) -> None:
    summary_path = tmp_path / "summary.json"
    command = [
        sys.executable, "-m", "fuzz", "--inputs", str(INPUTS), "--seconds", str(SECONDS), "--seed", "0",
        "--quiet", "--json", str(summary_path), "--crashers", str(tmp_path / "crashers"),
    ]  # fmt: skip
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=2 * SECONDS)
    assert summary_path.is_file(), run.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert [s for s in summary["seeds"] if s["outcome"] not in (OK, ERROR)] == []
    per_family = INPUTS // len(FAMILIES)
    for family in FAMILIES:
        for mode in ("lenient", "strict"):
            assert sum(summary["counts"][family][mode].values()) == per_family, (family, mode)
    failures = [f for f in summary["findings"] if f["outcome"] in FAILURES]
    assert failures == [], run.stdout
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
