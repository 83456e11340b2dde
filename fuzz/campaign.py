"""A fuzz campaign: warm up on the seeds, then mutate them in a forked worker until time is up.

Families take turns (so each decoder gets its share of the time whatever its speed), a
family's targets are drawn at random, and every input is ingested in each mode asked for.
A hang or a blow-up is run again in a fresh worker before it counts (a loaded machine can
slow one run down); a crash is deterministic and counts at once.
"""

from __future__ import annotations

import gc
import hashlib
import json
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .case import (
    BLOWUP,
    ERROR,
    FAILURES,
    HANG,
    OK,
    OUTCOMES,
    VAGUE,
    Case,
    Result,
    make_case,
    run_case,
    seed_case,
)
from .mutate import Donors
from .targets import ROOT, Target
from .worker import Limits, Worker

MODES = {"lenient": False, "strict": True}
RECYCLE_CASES = 2000
"""A worker is replaced after this many ingests, so what one case leaves behind (caches,
fragmentation) does not build up into the next cases' memory figures."""
SEED_LIMIT_SECONDS = 120.0
"""The time limit of an unmutated seed, measured to set the limits of its mutants."""


@dataclass(frozen=True)
class Settings:
    seconds: float = 60.0
    inputs: int | None = None  # stop after this many inputs (the same inputs on any machine)
    seed: int = 0
    modes: tuple[str, ...] = ("lenient", "strict")
    memory_limit: int = 1 << 30
    hang_factor: float = 10.0
    hang_floor: float = 10.0
    crashers: Path | None = None  # where to save failing inputs (and vague errors)
    progress: Callable[[str], None] | None = None


@dataclass
class Finding:
    """Every input that failed one way at one place: the first of each family is saved (one
    place can be reached from several decoders), the rest counted."""

    outcome: str
    signature: str
    message: str
    count: int = 0
    families: Counter[str] = field(default_factory=Counter)
    modes: set[str] = field(default_factory=set)
    examples: dict[str, str] = field(default_factory=dict)  # family -> saved crasher (JSON)

    def as_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome, "signature": self.signature, "count": self.count,
            "families": dict(self.families), "modes": sorted(self.modes), "message": self.message,
            "reproduce": {family: f"python -m fuzz replay {path}" for family, path in self.examples.items()},
        }  # fmt: skip


@dataclass
class Summary:
    settings: Settings
    counts: dict[str, dict[str, Counter[str]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(Counter))
    )
    findings: dict[tuple[str, str], Finding] = field(default_factory=dict)
    seeds: list[dict[str, object]] = field(default_factory=list)
    inputs: int = 0
    flaky: int = 0  # hangs and blow-ups that did not happen again
    interrupted: bool = False
    warmup_seconds: float = 0.0
    fuzz_seconds: float = 0.0

    def failures(self) -> int:
        return sum(f.count for f in self.findings.values() if f.outcome in FAILURES)

    def as_json(self) -> dict[str, object]:
        return {
            "commit": _commit(), "seed": self.settings.seed, "seconds": round(self.fuzz_seconds, 1),
            "warmup_seconds": round(self.warmup_seconds, 1), "inputs": self.inputs,
            "ingests": sum(sum(c.values()) for modes in self.counts.values() for c in modes.values()),
            "limits": {
                "memory_mib": self.settings.memory_limit >> 20, "hang_factor": self.settings.hang_factor,
                "hang_floor_seconds": self.settings.hang_floor,
            },
            "counts": {f: {mode: dict(c) for mode, c in modes.items()} for f, modes in self.counts.items()},
            "flaky": self.flaky,
            "interrupted": self.interrupted,
            "findings": [f.as_json() for f in sorted(self.findings.values(), key=lambda f: -f.count)],
            "seeds": self.seeds,
        }  # fmt: skip


def run(targets: Sequence[Target], settings: Settings) -> Summary:
    summary = Summary(settings)
    say = settings.progress or (lambda _: None)
    scratch = Path(tempfile.mkdtemp(prefix="cputrace-fuzz-"))
    try:
        files = {t.name: t.load() for t in targets}
        donors = _donors(targets, files)
        started = time.monotonic()
        say(f"warming up on {len(targets)} seeds")
        for target in targets:  # imports and compiles every decoder here, once, before forking
            for mode in settings.modes:
                run_case(seed_case(target, files[target.name]), MODES[mode], scratch / "warmup")
        gc.freeze()  # what the workers inherit stays shared: no reference counts touched
        campaign = _Campaign(scratch, settings, summary)
        try:
            limits = {t.name: campaign.measure_seed(t, files[t.name]) for t in targets}
            summary.warmup_seconds = time.monotonic() - started
            say(f"warm-up done in {summary.warmup_seconds:.0f} s; fuzzing for {settings.seconds:.0f} s")
            campaign.fuzz(targets, files, donors, limits)
        finally:
            campaign.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return summary


class _Campaign:
    def __init__(self, scratch: Path, settings: Settings, summary: Summary) -> None:
        self.scratch = scratch
        self.settings = settings
        self.summary = summary
        self.workers = 0
        self.worker = self._new_worker()

    def _new_worker(self) -> Worker:
        self.workers += 1
        return Worker(self.scratch / f"worker-{self.workers}", self.settings.memory_limit)

    def close(self) -> None:
        self.worker.close()

    def execute(self, case: Case, strict: bool, limits: Limits) -> Result:
        if self.worker.cases >= RECYCLE_CASES:
            self.worker.close()
            self.worker = self._new_worker()
        result, alive = self.worker.run(case, strict, limits)
        if not alive:
            self.worker = self._new_worker()
        return result

    def measure_seed(self, target: Target, files: dict[str, bytes]) -> Limits:
        """Run the unmutated seed in each mode: its outcome is recorded, its time sets the limit."""
        slowest = 0.0
        for mode in self.settings.modes:
            case = seed_case(target, files)
            result = self.execute(case, MODES[mode], Limits(SEED_LIMIT_SECONDS, self.settings.memory_limit))
            slowest = max(slowest, result.seconds)
            self.summary.seeds.append({
                "target": target.name, "mode": mode, "outcome": result.outcome,
                "seconds": round(result.seconds, 3),
                "peak_rss_mib": result.peak_rss >> 20, "message": result.message[:300],
            })  # fmt: skip
            if result.outcome not in (OK, ERROR):
                self._record(case, mode, result, target)
        return Limits(
            max(self.settings.hang_factor * slowest, self.settings.hang_floor), self.settings.memory_limit
        )

    def fuzz(
        self, targets: Sequence[Target], files: dict[str, dict[str, bytes]],
        donors: dict[str, dict[str, Donors]], limits: dict[str, Limits],
    ) -> None:  # fmt: skip
        settings, summary = self.settings, self.summary
        rng = random.Random(settings.seed)
        families = list(dict.fromkeys(t.family for t in targets))
        by_family = {f: [t for t in targets if t.family == f] for f in families}
        index: Counter[str] = Counter()
        started = time.monotonic()
        last_report = started
        turn = 0
        try:
            while time.monotonic() - started < settings.seconds and summary.inputs != settings.inputs:
                target = rng.choice(by_family[families[turn % len(families)]])
                turn += 1
                case = make_case(
                    target, files[target.name], donors[target.family], settings.seed, index[target.name]
                )
                index[target.name] += 1
                self._ingest(case, target, limits[target.name])
                if settings.progress and time.monotonic() - last_report > 15:
                    last_report = time.monotonic()
                    settings.progress(
                        f"{last_report - started:4.0f} s: {summary.inputs} inputs, "
                        f"{summary.failures()} failing ingests, {len(summary.findings)} distinct findings"
                    )
        except KeyboardInterrupt:  # the summary so far is still worth printing
            summary.interrupted = True
        summary.fuzz_seconds = time.monotonic() - started

    def _ingest(self, case: Case, target: Target, limits: Limits) -> None:
        """The case in each mode, counted and recorded."""
        self.summary.inputs += 1
        for mode in self.settings.modes:
            result = self._confirmed(case, MODES[mode], limits)
            self.summary.counts[target.family][mode][result.outcome] += 1
            if result.outcome not in (OK, ERROR):
                self._record(case, mode, result, target)

    def _confirmed(self, case: Case, strict: bool, limits: Limits) -> Result:
        result = self.execute(case, strict, limits)
        if result.outcome in (HANG, BLOWUP):
            again = self.execute(case, strict, limits)
            if again.outcome != result.outcome:
                self.summary.flaky += 1
                return again
        return result

    def _record(self, case: Case, mode: str, result: Result, target: Target) -> None:
        key = (result.outcome, result.signature)
        finding = self.summary.findings.get(key)
        if finding is None:
            finding = self.summary.findings[key] = Finding(
                result.outcome, result.signature, result.message[:500]
            )
        folder = self.settings.crashers
        if folder is not None and case.family not in finding.examples:
            finding.examples[case.family] = str(save_crasher(folder, case, mode, result, target))
        finding.count += 1
        finding.families[case.family] += 1
        finding.modes.add(mode)


def _donors(targets: Sequence[Target], files: dict[str, dict[str, bytes]]) -> dict[str, dict[str, Donors]]:
    """The seeds of each family, by kind: what a splice takes its bytes from."""
    found: dict[str, dict[str, list[bytes]]] = defaultdict(lambda: defaultdict(list))
    for target in targets:
        for seed in target.seeds:
            found[target.family][seed.kind].append(files[target.name][seed.name])
    return {family: {kind: Donors(tuple(f)) for kind, f in kinds.items()} for family, kinds in found.items()}


def save_crasher(folder: Path, case: Case, mode: str, result: Result, target: Target) -> Path:
    """FAMILY-HASH.bin (the mutated file, or the input when the options were mutated) and
    FAMILY-HASH.json: the case, what happened, and how to run it again."""
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(pickle.dumps((case.files, case.options, case.format, mode))).hexdigest()[:12]
    stem = folder / f"{case.family}-{digest}"
    mutated = case.mutated if case.mutated in case.files else case.main
    stem.with_suffix(".bin").write_bytes(case.files[mutated])
    description = {
        "target": case.target, "family": case.family, "index": case.index, "mode": mode,
        "format": case.format,
        "main": case.main, "mutated": case.mutated, "file": mutated, "mutations": case.mutations,
        "options": case.options, "images": list(case.images),
        "seeds": {s.name: {**s.describe(), "kind": s.kind} for s in target.seeds if s.name != mutated},
        "outcome": result.outcome, "signature": result.signature, "message": result.message,
        "traceback": result.traceback,
    }  # fmt: skip
    path = stem.with_suffix(".json")
    path.write_text(json.dumps(description, indent=2) + "\n")
    return path


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
    except OSError:
        return ""
    return out.stdout.strip()


def table(summary: Summary) -> str:
    """The summary as a text table: ingests per family and mode, by outcome; then the findings."""
    header = ["family", "mode", "ingests", *OUTCOMES]
    rows = [header]
    for family, modes in summary.counts.items():
        for mode, counts in modes.items():
            rows.append([family, mode, str(sum(counts.values())), *(str(counts.get(o, 0)) for o in OUTCOMES)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(_aligned(row, widths)) for row in rows]
    lines.append(
        f"{summary.inputs} inputs in {summary.fuzz_seconds:.0f} s (warm-up {summary.warmup_seconds:.0f} s), "
        f"seed {summary.settings.seed}; {summary.flaky} hangs or blow-ups did not happen again"
        + ("; interrupted" if summary.interrupted else "")
    )
    bad_seeds = [s for s in summary.seeds if s["outcome"] not in (OK, ERROR)]
    for seed in bad_seeds:
        lines.append(f"seed {seed['target']} ({seed['mode']}): {seed['outcome']}")
    if summary.findings:
        lines.append("")
        lines.append("findings (count, outcome, where; modes; an example of each family):")
    for finding in sorted(summary.findings.values(), key=lambda f: (f.outcome not in FAILURES, -f.count)):
        lines.append(f"{finding.count:6d}  {finding.outcome}  {finding.signature}")
        lines.append(f"        {', '.join(sorted(finding.modes))}")
        lines.append(f"        {finding.message.splitlines()[0][:160] if finding.message else ''}")
        for family, count in sorted(finding.families.items()):
            example = finding.examples.get(family)
            replay = f": python -m fuzz replay {example}" if example else ""
            lines.append(f"        {family} ({count}){replay}")
    return "\n".join(lines)


def _aligned(row: list[str], widths: list[int]) -> list[str]:
    """Names to the left, numbers to the right."""
    cells = zip(row, widths, strict=True)
    return [cell.rjust(width) if i >= 2 else cell.ljust(width) for i, (cell, width) in enumerate(cells)]


def print_table(summary: Summary) -> None:
    sys.stdout.write(table(summary) + "\n")


__all__ = ["MODES", "VAGUE", "Settings", "Summary", "print_table", "run", "save_crasher", "table"]
