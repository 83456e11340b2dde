"""One fuzz case: the files of a mutated input, how it is ingested, and what came of it.

`make_case` derives a case from a target, a campaign seed and the case's number alone, so
any case can be made again. `run_case` ingests it in this process and classifies what
happened; a hang or a memory blow-up is the supervising process's to see (`worker.py`).
"""

from __future__ import annotations

import random
import re
import shutil
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from .mutate import Donors, mutate, mutate_options
from .targets import Seed, Target

OK = "ok"
ERROR = "error"  # a CputraceError naming the file (or the option) at fault: documented
VAGUE = "vague-error"  # a CputraceError that names none of the case's files or options
INVALID = "invalid-store"  # the ingest succeeded, but the store breaks the model
CRASH = "crash"
HANG = "hang"
BLOWUP = "memory-blowup"
OUTCOMES = (OK, ERROR, VAGUE, INVALID, CRASH, HANG, BLOWUP)
FAILURES = (INVALID, CRASH, HANG, BLOWUP)
"""Outcomes that are defects: a campaign passes when it has none of these."""

MUTATE_OPTIONS = 0.12
"""How often a case mutates the options instead of a file (when the decoder reads any)."""
MAIN_WEIGHT = 3
IMAGE_WEIGHT = 0.05
"""The input file's and a program image's shares of the file mutations, relative to 1 for
the other files (ini files, sidecars)."""
SNIFFED = 0.15
"""How often a case leaves the format to sniffing (when the format is sniffed at all)."""


@dataclass
class Case:
    target: str
    family: str
    index: int  # the case's number within its target; -1 for the unmutated seed
    main: str
    files: dict[str, bytes]
    format: str | None
    options: dict[str, str]
    images: tuple[str, ...]
    mutated: str = ""  # the file mutated, "options", or "" (the seed itself)
    mutations: list[str] = field(default_factory=list)

    def image_specs(self, folder: Path) -> list[str]:
        """The case's program images as `--image` takes them, in `folder`."""
        return [str(folder / image) for image in self.images]


@dataclass
class Result:
    outcome: str
    seconds: float = 0.0
    peak_rss: int = 0  # the worker's peak resident bytes in the case (VmHWM), or at its kill
    signature: str = ""  # what groups findings: exception type and where in cputrace
    message: str = ""
    traceback: str = ""


def seed_case(target: Target, files: dict[str, bytes]) -> Case:
    return Case(target.name, target.family, -1, target.main, dict(files), target.format,
                dict(target.options), target.images)  # fmt: skip


def make_case(
    target: Target, files: dict[str, bytes], donors: dict[str, Donors], campaign_seed: int, index: int
) -> Case:
    """Case `index` of `target` in the campaign `campaign_seed`: the same inputs every time.
    `donors` holds the seeds of the target's family by kind, for splices."""
    rng = random.Random(f"{campaign_seed}/{target.name}/{index}")
    case = seed_case(target, files)
    case.index = index
    if target.format is not None and target.sniffable and rng.random() < SNIFFED:
        case.format = None  # left to sniffing, as a user who names no format
    if target.option_keys and rng.random() < MUTATE_OPTIONS:
        case.options, case.mutations = mutate_options(case.options, target.option_keys, rng)
        case.mutated = "options"
        return case
    seed = rng.choices(target.seeds, [_weight(s, target) for s in target.seeds])[0]
    kind_donors = donors.get(seed.kind, Donors(()))
    case.files[seed.name], case.mutations = mutate(files[seed.name], seed.kind, rng, kind_donors)
    case.mutated = seed.name
    return case


def _weight(seed: Seed, target: Target) -> float:
    return IMAGE_WEIGHT if seed.kind == "image" else MAIN_WEIGHT if seed.name == target.main else 1


def run_case(case: Case, strict: bool, folder: Path) -> Result:
    """Ingest the case in `folder` (made afresh) and classify the outcome."""
    from cputrace.errors import CputraceError
    from cputrace.ingest import ingest

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, data in case.files.items():
        (folder / name).write_bytes(data)
    started = time.perf_counter()
    try:
        result = ingest(
            [folder / case.main], folder / "out.ctrace",
            format=case.format, strict=strict, options=case.options, images=case.image_specs(folder),
        )  # fmt: skip
    except CputraceError as exc:
        return _exception_result(ERROR if _names_the_fault(str(exc), case) else VAGUE, exc, started)
    except MemoryError as exc:
        return _exception_result(BLOWUP, exc, started)
    except Exception as exc:
        return _exception_result(CRASH, exc, started)
    seconds = time.perf_counter() - started
    problem = store_problem(result.store, result.manifest)
    if problem:
        return Result(INVALID, seconds, signature=f"invalid store: {problem[0]}", message=problem[1])
    return Result(OK, seconds)


def _names_the_fault(message: str, case: Case) -> bool:
    """Whether an error message names a file of the case, or the option the case mutated."""
    if any(name in message for name in case.files):
        return True
    return case.mutated == "options" and any(key in message for key in case.options)


def _exception_result(outcome: str, exc: BaseException, started: float) -> Result:
    # A StopIteration leaving a generator becomes a RuntimeError where the generator is
    # consumed: the StopIteration says where the fault is.
    cause = exc.__cause__ if isinstance(exc.__cause__, StopIteration) else exc
    frames = traceback.extract_tb(cause.__traceback__)
    return Result(
        outcome, time.perf_counter() - started,
        signature=f"{type(cause).__name__} at {where_in_cputrace(frames)}",
        message=str(exc)[:2000],
        traceback="".join(traceback.format_exception(exc))[-6000:],
    )  # fmt: skip


def where_in_cputrace(frames: traceback.StackSummary | list[traceback.FrameSummary]) -> str:
    """The innermost frame in cputrace's own code, as `cputrace/x/y.py:LINE in FUNCTION`."""
    for frame in reversed(frames):
        marker = frame.filename.rfind("/cputrace/")
        if marker >= 0:
            return f"{frame.filename[marker + 1 :]}:{frame.lineno} in {frame.name}"
    return "(outside cputrace)"


_STACK_FRAME = re.compile(r'File "[^"]*/(cputrace/[^"]+)", line (\d+) in (\S+)')


def where_in_cputrace_text(stack: str) -> str:
    """The innermost cputrace frame of the decoding thread in a faulthandler dump (threads
    listed most recent call first; the decoding thread is the one inside ingest)."""
    threads = re.split(r"\n(?=\S)", stack)
    decoding = [t for t in threads if "cputrace/ingest.py" in t] or threads
    for thread in decoding:
        found = _STACK_FRAME.search(thread)
        if found:
            return f"{found.group(1)}:{found.group(2)} in {found.group(3)}"
    return "(outside cputrace)"


def store_problem(store: Path, manifest: dict[str, Any]) -> tuple[str, str] | None:
    """What breaks the model in a finished store (a short kind and the details), or None.

    The model (docs/model.md): each table in its stored schema, as many rows as the manifest
    counts, instructions numbered 0, 1, 2, ... and every other table in seq order, each row
    belonging to an instruction (or, before any, to the next one)."""
    from cputrace.model import TABLES
    from cputrace.store.manifest import table_path
    from cputrace.store.write import STORED_SCHEMAS

    instructions = 0
    for table in TABLES:
        file = pq.ParquetFile(table_path(store, table))
        if not file.schema_arrow.equals(STORED_SCHEMAS[table], check_metadata=False):
            return f"{table} schema", f"{table}: {file.schema_arrow} is not the model's"
        seq = file.read(columns=["seq"]).column("seq").to_numpy()
        counted = manifest.get("counts", {}).get(table)
        if counted != len(seq):
            return f"{table} count", f"{table}: {len(seq)} rows, the manifest counts {counted}"
        if table == "instructions":
            instructions = len(seq)
            if (seq != np.arange(len(seq))).any():
                return "instructions seq", "instructions: seq is not 0, 1, 2, ..."
        elif (seq[1:] < seq[:-1]).any():
            at = int(np.argmax(seq[1:] < seq[:-1]))
            return f"{table} seq order", f"{table}: row {at + 1} has seq {seq[at + 1]} after {seq[at]}"
        elif len(seq) and (seq[0] < 0 or seq[-1] > instructions):
            return f"{table} seq range", f"{table}: seq {seq[0]} to {seq[-1]}, {instructions} instructions"
    return None
