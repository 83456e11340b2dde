"""Many pairs of traces compared on a cluster (`cputrace batch diff`): which tests diverge, where first.

Pairs come from a CSV file of `a,b` rows or are matched by name between two folders or globs.
Each task is `analysis.diff.diff_traces` of one pair on a worker, cut to its first divergence,
which is explained there (`analysis.diff.explain`); the client gets one `PairDiff` per pair.
"""

from __future__ import annotations

import csv
import glob
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..analysis.diff import DiffOptions, diff_traces, explain, instruction_rows
from ..errors import CputraceError, TraceFormatError, UsageError
from ..store.folder import STORE_SUFFIX, is_store
from .cluster import distributed, run_tasks
from .tasks import Failed, absolute, missing_here, open_trace, reported


@dataclass(frozen=True, slots=True)
class PairDiff:
    """How two traces compare: the number of divergences and the first one."""

    a: str
    b: str
    divergences: int
    paired: int  # instructions paired up
    only_a: int  # instructions in runs only one trace has
    only_b: int
    cpu: int | None = None  # of the first divergence (None: the traces are the same)
    a_seq: int | None = None
    b_seq: int | None = None
    pc: int | None = None
    kinds: tuple[str, ...] = ()  # opcode, executed, time, registers, memory; or unaligned
    detail: str = ""  # what differs, as `cputrace diff` explains it

    @property
    def same(self) -> bool:
        return self.divergences == 0


@reported
def diff_pair(a: str, b: str, options: DiffOptions) -> PairDiff:
    """The task: one pair compared, on a worker."""
    trace_a, trace_b = open_trace(a), open_trace(b)
    result = diff_traces(trace_a, trace_b, options, limit=1)
    counts = (result.total, result.paired, result.only_a, result.only_b)
    if result.same:
        return PairDiff(a, b, *counts)
    first = result.divergences[0]
    rows_a = instruction_rows(trace_a, first.cpu, [first.a_seq] if first.a_seq is not None else [])
    rows_b = instruction_rows(trace_b, first.cpu, [first.b_seq] if first.b_seq is not None else [])
    if first.kinds == ("unaligned",):
        runs = [f"{n:,} only in {side}" for side, n in (("A", first.a_count), ("B", first.b_count)) if n]
        detail = ", ".join(runs)
    else:
        detail = "; ".join(explain(rows_a[0], rows_b[0], options))
    pc = (rows_a or rows_b)[0]["pc"] if rows_a or rows_b else None
    return PairDiff(a, b, *counts, first.cpu, first.a_seq, first.b_seq, pc, first.kinds, detail)


def diff_pairs(
    client: distributed.Client,
    pairs: Sequence[tuple[str | os.PathLike[str], str | os.PathLike[str]]],
    options: DiffOptions | None = None,
    on_done: Callable[[int], None] | None = None,
) -> list[PairDiff | Failed]:
    """Compare each pair (A, B) on the cluster of `client`: divergent pairs first, then pairs
    that could not be compared, then identical ones, each in the order given."""
    options = options or DiffOptions()
    results: dict[int, PairDiff | Failed] = {}
    jobs, submitted = [], []  # the pairs sent to the cluster, and their indexes in `pairs`
    for index, (a, b) in enumerate(pairs):
        failed = missing_here(f"{a} and {b}", (a, b))
        if failed is None:
            jobs.append((f"{a} and {b}", (absolute(a), absolute(b), options)))
            submitted.append(index)
            continue
        results[index] = failed
        if on_done is not None:
            on_done(1)
    for at, result in run_tasks(client, diff_pair, jobs, on_done):
        results[submitted[at]] = result
    for index, (a, b) in enumerate(pairs):  # as the caller named them, not as workers were told
        result = results[index]
        if isinstance(result, PairDiff):
            results[index] = replace(result, a=os.fspath(a), b=os.fspath(b))

    def rank(index: int) -> int:
        result = results[index]
        return 2 if isinstance(result, PairDiff) and result.same else 0 if isinstance(result, PairDiff) else 1

    return [results[index] for index in sorted(results, key=lambda index: (rank(index), index))]



def _text_lines(lines: Iterable[bytes], name: str) -> Iterator[str]:
    """The lines of a pairs file as text, or TraceFormatError naming the first that is not UTF-8
    (a binary file given by mistake)."""
    for number, line in enumerate(lines, 1):
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError:
            raise TraceFormatError(name, str(number), "UTF-8 text, CSV rows a,b", line[:64]) from None


def pairs_from_csv(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """The pairs of a CSV file of `a,b` rows (a first row `a,b` is a header); relative paths are
    relative to the file's folder."""
    folder = Path(path).parent
    pairs = []
    with open(path, "rb") as lines:
        rows = csv.reader(_text_lines(lines, os.fspath(path)))
        try:
            for number, row in enumerate(rows, 1):
                cells = [cell.strip() for cell in row]
                if not any(cells) or (number == 1 and [c.lower() for c in cells] == ["a", "b"]):
                    continue
                if len(cells) != 2 or not all(cells):
                    raise CputraceError(f"{os.fspath(path)}:{number}: expected two paths, a,b, got {row!r}")
                pairs.append((str(folder / cells[0]), str(folder / cells[1])))
        except csv.Error as exc:  # a field past csv's limit, say: not a CSV of pairs
            raise TraceFormatError(os.fspath(path), str(rows.line_num), "CSV rows a,b", str(exc)) from None
    if not pairs:
        raise CputraceError(f"{os.fspath(path)}: no pairs (expected rows of two paths, a,b)")
    return pairs


def pairs_by_name(a: str, b: str) -> tuple[list[tuple[str, str]], list[Failed]]:
    """Traces of the same name under `a` and `b` (each a folder or a glob), by name; a name only
    one side has is a `Failed`. An input and its cached store (`t.tarmac`, `t.tarmac.ctrace`)
    are one name, the input taken (its store is reused while it is current)."""
    named_a, named_b = _traces_by_name(a), _traces_by_name(b)
    pairs = [(named_a[name], named_b[name]) for name in sorted(named_a.keys() & named_b.keys())]
    missing = [
        Failed(path, f"{path}: no trace of that name in {other}")
        for named, other_named, other in ((named_a, named_b, b), (named_b, named_a, a))
        for name, path in sorted(named.items())
        if name not in other_named
    ]
    if not pairs and not missing:
        raise UsageError(f"no traces in {a} or {b}")
    return pairs, missing


def _traces_by_name(where: str) -> dict[str, str]:
    if os.path.isdir(where) and not is_store(where):
        listed = [os.path.join(where, name) for name in sorted(os.listdir(where)) if not name.startswith(".")]
        paths = [path for path in listed if os.path.isfile(path) or is_store(path)]
    else:
        paths = sorted(glob.glob(where))
        if not paths:
            raise UsageError(f"{where}: no such folder, and no file matches it")
    named: dict[str, str] = {}
    for path in paths:
        name = os.path.basename(path.rstrip(os.sep)).removesuffix(STORE_SUFFIX)
        if not path.endswith(STORE_SUFFIX) or name not in named:
            named[name] = path
    return named
