"""Merged coverage of many traces of one image on a cluster (`cputrace batch coverage`).

Each task is `analysis.coverage.compute_coverage` of one trace on a worker (the image loaded
once per worker); the client adds the results up (`Coverage.plus`) as they come, so the suite's
coverage is one `Coverage`, reported as `cputrace coverage` reports it. `Uniqueness` keeps,
for each instruction, line, function and branch outcome, how many traces covered it and the
first that did: what a trace covered that no other did follows, with memory that grows with
the image, not with the number of traces.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..analysis.coverage import LISTING, Coverage, compute_coverage
from ..errors import CputraceError
from ..model import Isa
from .cluster import distributed, run_tasks
from .tasks import Failed, absolute, absolute_images, image_of, open_trace, reported

UNITS = ("instructions", "lines", "functions", "branch outcomes")


@reported
def coverage_of(
    trace: str, images: Sequence[str], image_name: str, address_range: tuple[int, int] | None,
    isa: Isa | None, cpus: set[int] | None, listing: str,
) -> Coverage:  # fmt: skip
    """The task: one trace's coverage of the image, on a worker."""
    image = image_of(images)
    if image is None:
        raise CputraceError("coverage needs the program image")
    return compute_coverage(
        open_trace(trace), image, image_name=image_name, address_range=address_range, default_isa=isa,
        cpus=cpus, listing=listing,
    )  # fmt: skip


def covered_units(coverage: Coverage) -> dict[str, np.ndarray]:
    """Whether each instruction, line (file and line), function and branch outcome ran."""
    hits = coverage.hits > 0
    line_key = coverage.file.astype(np.int64) << 32 | coverage.line.astype(np.int64)
    _, line_of = np.unique(line_key, return_inverse=True)
    function = coverage.code.function
    in_function = function >= 0
    branches = coverage.code.conditional_branch
    return {
        "instructions": hits,
        "lines": np.bincount(line_of[hits], minlength=int(line_of.max(initial=-1)) + 1) > 0,
        "functions": np.bincount(function[hits & in_function], minlength=len(coverage.code.functions)) > 0,
        "branch outcomes": np.concatenate([coverage.taken[branches] > 0, coverage.not_taken[branches] > 0]),
    }


class Uniqueness:
    """Per unit of code (`UNITS`): how many traces covered it, and the first that did."""

    def __init__(self) -> None:
        self.coverers: dict[str, np.ndarray] = {}
        self.first: dict[str, np.ndarray] = {}

    def add(self, index: int, coverage: Coverage) -> None:
        for unit, covered in covered_units(coverage).items():
            if unit not in self.coverers:
                self.coverers[unit] = np.zeros(len(covered), np.int64)
                self.first[unit] = np.full(len(covered), -1, np.int64)
            self.coverers[unit] += covered
            self.first[unit] = np.where(covered & (self.first[unit] < 0), index, self.first[unit])

    def only(self, traces: int) -> dict[str, np.ndarray]:
        """Per unit kind, the number of units each of `traces` traces covered that no other did."""
        counted = {}
        for unit in UNITS:
            if unit not in self.coverers:
                counted[unit] = np.zeros(traces, np.int64)
                continue
            alone = self.coverers[unit] == 1
            counted[unit] = np.bincount(self.first[unit][alone], minlength=traces)
        return counted


@dataclass(frozen=True, slots=True)
class TraceShare:
    """What one trace of a suite covered, and what of it no other trace did."""

    trace: str
    instructions: int  # instructions it ran
    only: dict[str, int]  # per unit kind: units only it covered


@dataclass
class MergedCoverage:
    """The suite's coverage (None: no trace could be read), each trace's share, the failures."""

    coverage: Coverage | None
    shares: list[TraceShare]
    failed: list[Failed]


def merged_coverage(
    client: distributed.Client,
    traces: Sequence[str | os.PathLike[str]],
    images: Sequence[str],
    *,
    image_name: str = "image",
    address_range: tuple[int, int] | None = None,
    default_isa: Isa | None = None,
    cpus: set[int] | None = None,
    listing: str = LISTING,
    on_done: Callable[[int], None] | None = None,
) -> MergedCoverage:
    """The coverage of the image by all `traces` together, computed trace by trace on the
    cluster of `client` (arguments as `compute_coverage` takes them), and what each trace
    covered that no other did. A trace that fails is left out and listed."""
    specs = absolute_images(images)
    jobs = [
        (os.fspath(trace), (absolute(trace), specs, image_name, address_range, default_isa, cpus, listing))
        for trace in traces
    ]
    total: Coverage | None = None
    uniqueness = Uniqueness()
    ran: dict[int, int] = {}
    failed: dict[int, Failed] = {}
    for index, result in run_tasks(client, coverage_of, jobs, on_done):
        if isinstance(result, Failed):
            failed[index] = result
            continue
        total = result if total is None else total.plus(result)
        uniqueness.add(index, result)
        ran[index] = int(np.count_nonzero(result.hits))
    only = uniqueness.only(len(jobs))
    shares = [
        TraceShare(jobs[index][0], ran[index], {unit: int(only[unit][index]) for unit in UNITS})
        for index in sorted(ran)
    ]
    return MergedCoverage(total, shares, [failed[index] for index in sorted(failed)])
