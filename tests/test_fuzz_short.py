"""The short fuzz campaign: a minute of mutated seeds for every decoder, in both modes, with
no crash, hang, memory blow-up or store that breaks the model (fuzz/README.md).

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
SECONDS = 60
LEAST_INGESTS = 20
"""Each family and mode gets at least this many ingests in the minute (they take turns)."""


def test_a_short_campaign_finds_no_crash_hang_or_blowup(tmp_path: Path) -> None:
    summary_path = tmp_path / "summary.json"
    command = [sys.executable, "-m", "fuzz", "--seconds", str(SECONDS), "--quiet", "--seed", "0",
               "--json", str(summary_path), "--crashers", str(tmp_path / "crashers")]  # fmt: skip
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=30 * SECONDS)
    assert summary_path.is_file(), run.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert [s for s in summary["seeds"] if s["outcome"] not in (OK, ERROR)] == []
    for family in FAMILIES:
        for mode in ("lenient", "strict"):
            ingests = sum(summary["counts"].get(family, {}).get(mode, {}).values())
            assert ingests >= LEAST_INGESTS, (family, mode, ingests)
    failures = [f for f in summary["findings"] if f["outcome"] in FAILURES]
    assert failures == [], run.stdout
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
