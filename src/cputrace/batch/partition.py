"""One input split across a cluster's workers into a partitioned store (`cputrace ingest
--workers N`, `--scheduler ADDRESS`).

The input is split into byte ranges at record boundaries; each range is decoded on a worker
into a part of each table (`PartWriter`), and the parts make one store whose rows are those
of the single-process ingest, row for row (seq and line numbers run on across parts). How
a range is decoded from the state of the lines before it, and checked to join up with its
neighbours, is the format's, in a module with the same steps for each (`SPLITS`:
formats/tarmac/split.py says what each step does). The client only splits, sums small
results, hashes the whole input as the single-process ingest records it (while the workers
decode) and writes the manifest.

An input that cannot be split (compressed, a format without a split module, or one its
module decodes whole: see docs/formats.md) is ingested whole by one worker, into a plain store.

Numbering: where a range's instructions can be counted before it is decoded (Tarmac,
ARMulator), each range is decoded with the seq it starts at. Where they cannot (CoreSight: a
range's instructions are known once walked; its module says `NUMBERED_AFTER`), each range is
numbered from its start carry's `seq_base`, and each part whose numbering is off the end of
the part before it is written again with its seqs shifted (`_shifted_part`), on the workers.

Atomic as `ingest`: the parts are written into the store's staging folder, which becomes the
store only once every part is written and checked; a part that fails, a worker that dies
too often or Ctrl-C leave no store (`PartitionedStoreWriter.abort` stops the parts still
being written before it removes the staging folder). A worker that dies mid-part is
replaced and its part written again whole.
"""

from __future__ import annotations

import importlib
import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CputraceError, UsageError, os_error_text
from ..ingest import IngestResult, IngestStats, check_walk, default_store_path, manifest_of
from ..inputs import InputFile
from ..model import TABLES
from ..store.checksums import file_xxh3_128
from ..store.manifest import part_file
from ..store.write import PartitionedStoreWriter, PartWriter, out_of_order
from .cluster import distributed, run_tasks
from .ingest import ingest_one
from .tasks import PART_BYTES, Failed, absolute, absolute_images, image_of, readable, reported

if TYPE_CHECKING:
    from types import ModuleType

SPLITS = {
    "tarmac": "cputrace.formats.tarmac.split",
    "armulator": "cputrace.formats.armulator.split",
    "coresight": "cputrace.formats.coresight.split",
}
"""The formats whose inputs split, and the module of each with the steps of a split: `whole`
(why an input is decoded whole, None: it splits), `split_points`, `count_range` (a task; none
where `NUMBERED_AFTER`), `first_carries`, `RangeDecode` (a task) whose `end` carry `joins` the
next range's start or not, and `finish` (the whole input's notes); `NUMBERED_AFTER` says
whether its ranges are numbered after they are decoded (the module docstring)."""


def _steps(format: str) -> ModuleType:
    """The split module of `format` (imported on first use: a worker loads only the one its
    job needs)."""
    return importlib.import_module(SPLITS[format])


@dataclass(frozen=True, slots=True)
class _Job:
    """What every task of one split ingest is given."""

    path: str
    format: str
    version: str  # the staging version folder the parts go into
    store: str  # as errors name it
    strict: bool
    options: dict[str, Any]
    images: tuple[str, ...]  # program image specs, absolute


@dataclass
class _Part:
    """A part decoded on a worker: its files, figures and where it ended (the format's
    `Carry` and `RangeFacts`)."""

    files: dict[str, dict[str, Any]]
    stats: IngestStats
    warnings: int
    samples: list[str]
    end: Any
    facts: Any
    first_seq: dict[str, int]
    last_seq: dict[str, int]
    start_seq: int  # the seq its rows were numbered from (its start carry's seq_base)


def splittable(source: InputFile, format: str, images: Sequence[str], options: dict[str, Any]) -> str | None:
    """Why the input cannot be split (None: it can)."""
    if source.compression is not None:
        return f"a {source.compression} input is read from its start"
    if format not in SPLITS:
        return f"{format} inputs are decoded whole (docs/formats.md)"
    return _steps(format).whole(source, options, images)


def ingest_split(
    client: distributed.Client,
    source: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    format: str | None = None,
    strict: bool = False,
    options: Mapping[str, Any] | None = None,
    images: Sequence[str] = (),
    part_bytes: int = PART_BYTES,
    splits: Sequence[int] | None = None,
    on_format: Callable[[str, str], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> IngestResult:
    """Ingest one input on the cluster of `client`, split into parts of about `part_bytes`
    input bytes decoded side by side, into a partitioned store at `output` (default
    INPUT.ctrace), or split at `splits` (byte offsets, each moved on to an instruction line
    if not at one). Errors as `ingest`'s; a part that fails fails the whole (CputraceError
    naming the input), leaving no store. `on_note` hears why an input is not split;
    `progress` the input bytes of each task done (each byte is read twice: 2 x the size)."""
    from ..formats import check_options, get_decoder, sniff

    if part_bytes < 1:
        raise UsageError(f"a part must be 1 byte or more, got {part_bytes}")
    store = Path(output) if output is not None else default_store_path([source])
    given = dict(options or {})
    file = InputFile(source)
    decoder = get_decoder(format) if format else sniff(file.head(), file.path)
    check_options(given, {decoder.name})
    if on_format is not None:
        on_format(file.path, decoder.name)
    why_not = splittable(file, decoder.name, images, given)
    if why_not is not None:
        if on_note is not None:
            on_note(f"{file.path}: not split: {why_not}")
        done = None if progress is None else lambda _tasks: progress(2 * file.size)
        return _ingest_whole(client, file, store, decoder.name, strict, given, images, done)
    parts = math.ceil(file.size / part_bytes)
    nominal = sorted(splits) if splits is not None else equal_shares(file.size, parts)
    return _SplitIngest(client, file, decoder.name, store, strict, given, images, progress).run(nominal)


def equal_shares(size: int, parts: int) -> list[int]:
    """Where `parts` equal shares of `size` bytes start, after the first."""
    return [size * index // parts for index in range(1, parts)]


def _ingest_whole(
    client: distributed.Client, file: InputFile, store: Path, format: str, strict: bool,
    options: dict[str, Any], images: Sequence[str], on_done: Callable[[int], None] | None,
) -> IngestResult:  # fmt: skip
    """The input ingested by one worker into a plain store."""
    args = (absolute(file.path), absolute(store), format, strict, options, absolute_images(images))
    [(_, result)] = run_tasks(client, ingest_one, [(file.path, args)], on_done)
    if isinstance(result, Failed):
        raise UsageError(result.message) if result.usage else CputraceError(result.message)
    return IngestResult(store, result.manifest)


class _SplitIngest:
    """The steps of one split ingest, on the client."""

    def __init__(
        self, client: distributed.Client, file: InputFile, format: str, store: Path, strict: bool,
        options: dict[str, Any], images: Sequence[str], progress: Callable[[int], None] | None,
    ) -> None:  # fmt: skip
        self.client = client
        self.file = file
        self.format = format
        self.steps = _steps(format)
        self.store = store
        self.strict = strict
        self.options = options
        self.image_specs = [str(spec) for spec in images]
        self.images = absolute_images(images)
        self.progress = progress
        self.sizes: list[int] = []  # of each range, in input bytes

    def run(self, nominal: list[int]) -> IngestResult:
        steps = self.steps
        started = time.perf_counter()
        starts = steps.split_points(self.file, nominal)
        ranges = list(zip(starts, [*starts[1:], self.file.size], strict=True))
        writer = PartitionedStoreWriter(self.store, [self.file.path])
        path, version = absolute(self.file.path), str(writer.version)
        job = _Job(path, self.format, version, str(self.store), self.strict, self.options, self.images)
        whole = _WholeHash(self.file.path)
        try:
            self.sizes = [stop - start for start, stop in ranges]
            counts = self._counts(job, ranges)
            carries = steps.first_carries(counts)
            last = len(ranges) - 1
            parts: list[_Part] = self._each(
                _decode_part, [(job, i, r, carries[i], i == last) for i, r in enumerate(ranges)]
            )
            for i in range(last):  # the parts that did not join up, decoded again
                if parts[i].end.joins(carries[i + 1], parts[i + 1].facts):
                    continue
                redo = _renumbered(carries, i + 1, parts[i].end, counted=not steps.NUMBERED_AFTER)
                again = [(job, j, ranges[j], carries[j], j == last) for j in redo]
                for j, part in zip(redo, self._each(_decode_part, again, first=i + 1), strict=True):
                    parts[j] = part
            self._numbered(job, parts)
            manifest, files = self._manifest(parts, ranges, whole.digest(), started)
            return IngestResult(writer.commit(manifest, files), manifest)
        except BaseException:
            whole.stop()
            writer.abort()
            raise

    def _counts(self, job: _Job, ranges: list[tuple[int, int]]) -> list[Any]:
        """Step 1, each range's count; none for a `NUMBERED_AFTER` format, whose ranges are
        counted as they are walked (no task: the step's share of `progress` passes at once)."""
        if not self.steps.NUMBERED_AFTER:
            return self._each(_count_part, [(job, byte_range) for byte_range in ranges])
        if self.progress is not None:
            self.progress(self.file.size)
        return [None] * len(ranges)

    def _each(
        self, task: Callable[..., Any], jobs: list[tuple[Any, ...]], first: int | None = 0
    ) -> list[Any]:
        """`task(*args)` for each of `jobs` (of the ranges from `first` on; None: of no range,
        whose bytes `progress` does not hear of) on the cluster, their results in order; the
        first failure (in input order) raised as the input's error."""
        results: dict[int, Any] = {}
        named = [(self.file.path, args) for args in jobs]
        for index, result in run_tasks(self.client, task, named):
            results[index] = result
            if self.progress is not None and first is not None:
                self.progress(self.sizes[first + index])
        failed = [results[i] for i in sorted(results) if isinstance(results[i], Failed)]
        if failed:
            earliest = failed[0]
            raise UsageError(earliest.message) if earliest.usage else CputraceError(earliest.message)
        return [results[index] for index in range(len(jobs))]

    def _numbered(self, job: _Job, parts: list[_Part]) -> None:
        """Shift the seqs of each part whose numbering does not run on from the end of the part
        before it (`NUMBERED_AFTER` formats: each part numbered from its start carry's
        seq_base), written again side by side. Parts of counted formats start at their seq."""
        if not self.steps.NUMBERED_AFTER:
            return
        shifts, shift = [0], 0
        for before, part in itertools.pairwise(parts):
            shift += before.end.seq_base - part.start_seq
            shifts.append(shift)
        moved = [index for index, by in enumerate(shifts) if by]
        if not moved:
            return
        jobs = [(job, index, shifts[index]) for index in moved]
        shifted = self._each(_shifted_part, jobs, first=None)
        for index, (files, first_seq, last_seq) in zip(moved, shifted, strict=True):
            parts[index].files, parts[index].first_seq, parts[index].last_seq = files, first_seq, last_seq

    def _manifest(
        self, parts: list[_Part], ranges: list[tuple[int, int]], digest: str | None, started: float
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The store's manifest and files, after checking that the parts' rows follow each
        other in seq order (as `TableWriter` checks a file's)."""
        from ..formats import DecodeContext
        from ..formats.base import MAX_WARNINGS_KEPT

        stats = IngestStats()
        ctx = DecodeContext(strict=self.strict, options=self.options)
        ctx.image = image_of(self.images)  # the walk's checks (`check_walk`) are the image's
        files: dict[str, dict[str, Any]] = {}
        last_seq: dict[str, int] = {}
        for part in parts:
            for table in TABLES:
                before, first = last_seq.get(table), part.first_seq.get(table)
                repeats = table == "instructions" and first == before
                if before is not None and first is not None and (first < before or repeats):
                    raise out_of_order(self.store, table, stats.counts[table], first, before)
                if table in part.last_seq:
                    last_seq[table] = part.last_seq[table]
            stats.merge(part.stats)
            ctx.warnings += part.warnings
            ctx.warning_samples += part.samples[: MAX_WARNINGS_KEPT - len(ctx.warning_samples)]
            files.update(part.files)
        self.steps.finish([part.facts for part in parts], [part.end for part in parts], self.file.path, ctx)
        check_walk(ctx, stats, [self.file.path])
        fingerprint = self.file.fingerprint
        recorded = {
            "path": fingerprint.path, "size": fingerprint.size, "mtime_ns": fingerprint.mtime_ns,
            "xxh3_128": digest, "compression": None, "format": self.format, "first_seq": 0,
            "instructions": stats.counts["instructions"],
            "parts": [{"start": start, "stop": stop} for start, stop in ranges],
        }  # fmt: skip
        images = {"images": self.image_specs} if self.image_specs else {}  # as `ingest` records them
        options = {"strict": self.strict, **images, **self.options}
        manifest = manifest_of([self.format], [recorded], options, stats, ctx, started)
        return {**manifest, "parts": len(parts)}, files


class _WholeHash:
    """The input's XXH3-128, as the single-process ingest records it (`ingest` and
    `cputrace.open` reuse a store by it), computed on a thread of the client while the workers
    decode: each part's task reads only its range."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._digest: str | None = None
        self._error: OSError | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cputrace-input-hash", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._digest = file_xxh3_128(self._path, self._stop)
        except OSError as exc:  # raised on the client's thread by `digest`
            self._error = exc

    def digest(self) -> str | None:
        self._thread.join()
        if self._error is not None:
            raise CputraceError(os_error_text(self._error))
        return self._digest

    def stop(self) -> None:
        """Stop reading (the job failed): the thread ends at its next block."""
        self._stop.set()


def _renumbered(carries: list[Any], first: int, start: Any, *, counted: bool) -> list[int]:
    """Start part `first` from `start` (the end of the part before it), and, where the scan
    step counted each range's numbering (`counted`), the parts after it from their carries
    renumbered as much if its numbering differs (a count was wrong): the parts to decode
    again, side by side."""
    if not counted:
        carries[first] = start
        return [first]
    seq_shift, line_shift = start.seq_base - carries[first].seq_base, start.line - carries[first].line
    carries[first] = start
    if not (seq_shift or line_shift):
        return [first]
    for later in carries[first + 1 :]:
        later.seq_base += seq_shift
        later.line += line_shift
    return list(range(first, len(carries)))


@reported
def _count_part(job: _Job, byte_range: tuple[int, int]) -> Any:
    """The task of step 1 (formats/tarmac/split.py): a range's lines and instructions."""
    from ..formats import DecodeContext, check_options

    ctx = DecodeContext(strict=job.strict, options=check_options(job.options, {job.format}))
    ctx.image = image_of(job.images)
    return _steps(job.format).count_range(InputFile(readable(job.path)), ctx, byte_range)


@reported
def _decode_part(job: _Job, index: int, byte_range: tuple[int, int], start: Any, final: bool) -> _Part:
    """The task of step 2: a range decoded from `start` into part `index` of each table."""
    from ..formats import DecodeContext, check_options
    from ..ingest import BackgroundWrites

    source = InputFile(readable(job.path))
    ctx = DecodeContext(strict=job.strict, options=check_options(job.options, {job.format}))
    ctx.image = image_of(job.images)
    writer = PartWriter(job.version, index, Path(job.store))
    stats = IngestStats()
    writes = BackgroundWrites(writer, stats)
    start_seq = start.seq_base  # before decoding: a carry may be decoded on in place
    decode = _steps(job.format).RangeDecode(source, ctx, start, byte_range, final)
    try:
        for batch in decode.batches():
            writer.check_open()
            for table, data in batch.items():
                writes.submit(table, data)
        writes.drain()
        files = writer.close()
    except BaseException:
        writes.close()
        writer.abort()
        raise
    writes.close()
    return _Part(
        files, stats, ctx.warnings, ctx.warning_samples, decode.end, decode.facts, writer.first_seq,
        writer.last_seq, start_seq,
    )  # fmt: skip


@reported
def _shifted_part(job: _Job, index: int, shift: int) -> tuple[dict[str, Any], dict[str, int], dict[str, int]]:
    """The task of the numbering step: part `index` written again with `shift` added to the
    seq of every row, row group by row group (one vectorised add each), replacing the part
    whole as `PartWriter` writes one. Returns its files, first and last seqs."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    version = Path(job.version)
    writer = PartWriter(job.version, index, Path(job.store))
    try:
        for table in TABLES:
            with pq.ParquetFile(version / part_file(table, index)) as stored:
                for group in range(stored.num_row_groups):
                    rows = stored.read_row_group(group)
                    at = rows.schema.get_field_index("seq")
                    seq = pc.add(rows.column(at), pa.scalar(shift, pa.int64()))
                    writer.write(table, rows.set_column(at, rows.schema.field(at), seq))
        files = writer.close()
    except BaseException:
        writer.abort()
        raise
    return files, writer.first_seq, writer.last_seq
