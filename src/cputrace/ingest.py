"""Ingest: inputs -> decoder -> store, with cache reuse of stores whose inputs are unchanged."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from .errors import WRITE_ERRORS, CputraceError
from .inputs import Fingerprint, InputFile
from .model import TABLES
from .store.checksums import file_xxh3_128, read_manifest
from .store.folder import STORE_SUFFIX, check_output, is_store
from .store.write import StoreWriter, TableWriter

if TYPE_CHECKING:
    from .formats import DecodeContext

ProgressHook = Callable[[int], None]


@dataclass
class IngestResult:
    store: Path
    manifest: dict[str, Any]
    reused: bool = False


@dataclass
class IngestStats:
    """Summary figures gathered from the batches as they are written."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    time_min: int | None = None
    time_max: int | None = None
    cpus: set[int] = field(default_factory=set)
    isas: set[str] = field(default_factory=set)
    modes: set[str] = field(default_factory=set)
    event_kinds: dict[str, int] = field(default_factory=dict)
    gaps: dict[str, tuple[int, str]] = field(default_factory=dict)  # trace_gap name -> (count, a text)

    def add(self, table: str, data: pa.Table) -> None:
        self.counts[table] += data.num_rows
        if data.num_rows == 0:
            return
        times = pc.min_max(data.column("time"))
        lo, hi = times["min"].as_py(), times["max"].as_py()
        if lo is not None:
            self.time_min = lo if self.time_min is None else min(self.time_min, lo)
            self.time_max = hi if self.time_max is None else max(self.time_max, hi)
        cpus = pc.min_max(data.column("cpu"))
        if cpus["min"] == cpus["max"]:
            self.cpus.add(cpus["min"].as_py())
        else:
            self.cpus.update(pc.unique(data.column("cpu")).to_pylist())
        if table == "instructions":
            self.isas.update(_distinct(data.column("isa")))
            self.modes.update(_distinct(data.column("mode")))
        elif table == "events":
            kinds = data.column("kind").combine_chunks()
            for item in pc.value_counts(kinds.indices).to_pylist():
                kind = kinds.dictionary[item["values"]].as_py()
                self.event_kinds[kind] = self.event_kinds.get(kind, 0) + item["counts"]
                if kind == "trace_gap":
                    self._add_gaps(data.filter(pc.equal(kinds.indices, item["values"])))

    def merge(self, later: IngestStats) -> None:
        """Add the figures of the rows that follow these (the next part of a split input)."""
        for table, count in later.counts.items():
            self.counts[table] += count
        for value in (later.time_min, later.time_max):
            if value is not None:
                self.time_min = value if self.time_min is None else min(self.time_min, value)
                self.time_max = value if self.time_max is None else max(self.time_max, value)
        self.cpus |= later.cpus
        self.isas |= later.isas
        self.modes |= later.modes
        for kind, count in later.event_kinds.items():
            self.event_kinds[kind] = self.event_kinds.get(kind, 0) + count
        for name, (count, text) in later.gaps.items():
            mine, sample = self.gaps.get(name, (0, text))
            self.gaps[name] = (mine + count, sample)

    def _add_gaps(self, gaps: pa.Table) -> None:
        """Count trace gaps by name, keeping one text of each."""
        names, texts = gaps.column("name").to_pylist(), gaps.column("text").to_pylist()
        for name, text in zip(names, texts, strict=True):
            count, sample = self.gaps.get(name, (0, text))
            self.gaps[name] = (count + 1, sample)


ROW_GROUP_ROWS = 1 << 17
"""Rows gathered before a table's rows are written (as one row group): fewer, larger writes
encode faster, and each costs the writing thread a wait for the interpreter lock."""


class BackgroundWrites:
    """Row groups checked, summed into `stats` and written on a thread per table, a few behind
    decoding.

    Batches are gathered into row groups on the decoding thread; all else is done once per row
    group on the writing threads, in Arrow's kernels and Parquet's encoder (which release the
    interpreter lock): decoding is what an ingest waits for. A thread per table keeps each
    table's row groups in order, and lets the last ones of all tables, written once decoding
    has ended, be written side by side. A table's first row group is a quarter of the others:
    its writing thread starts sooner, while decoding is slow (a compressed trace's first rows
    wait for the program's code to be decoded), instead of idling until a whole group is held.
    """

    def __init__(self, writer: TableWriter, stats: IngestStats, depth: int = 2) -> None:
        self._writer = writer
        self._stats = stats
        self._stats_lock = threading.Lock()
        self._pools = {table: ThreadPoolExecutor(max_workers=1) for table in TABLES}
        self._pending: deque[Future[None]] = deque()
        self._depth = depth
        self._held: dict[str, list[pa.Table]] = {table: [] for table in TABLES}
        self._held_rows = dict.fromkeys(TABLES, 0)  # a running count: many small batches stay linear
        self._started: set[str] = set()  # tables whose first row group is written

    def submit(self, table: str, data: pa.Table) -> None:
        if data.num_rows == 0:
            return
        self._held[table].append(data)
        self._held_rows[table] += data.num_rows
        group = ROW_GROUP_ROWS if table in self._started else ROW_GROUP_ROWS // 4
        if self._held_rows[table] >= group:
            self._started.add(table)
            self._write(table)

    def drain(self) -> None:
        """Write what is held, and wait for every write."""
        for table in TABLES:
            self._write(table)
        while self._pending:
            self._pending.popleft().result()

    def close(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=True, cancel_futures=True)

    def _check_and_write(self, table: str, group: pa.Table) -> None:
        group = self._writer.checked(table, group)
        with self._stats_lock:
            self._stats.add(table, group)
        self._writer.write(table, group)

    def _write(self, table: str) -> None:
        held, self._held[table], self._held_rows[table] = self._held[table], [], 0
        if held:
            if any(part.schema != held[0].schema for part in held[1:]):  # one schema to concatenate
                held = [self._writer.checked(table, part) for part in held]
            self._pending.append(
                self._pools[table].submit(self._check_and_write, table, pa.concat_tables(held))
            )
        while len(self._pending) > self._depth:
            self._pending.popleft().result()


def _distinct(column: pa.ChunkedArray) -> set[str]:
    """Distinct values of a dictionary column, without decoding every row.

    Most chunks use one value, or none (a column a decoder leaves empty): their indices'
    min and max say so, in much less time than finding the distinct indices takes."""
    values: set[str] = set()
    for chunk in column.chunks:
        bounds = pc.min_max(chunk.indices)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is not None and low == high:
            values.add(chunk.dictionary[low].as_py())
        elif low is not None:
            used = pc.unique(chunk.indices.drop_null())
            values.update(chunk.dictionary.take(used).to_pylist())
    return values


WALK_LOSS_SPACING = 10
"""A walk through the program image that lost its place once or more per this many instructions
it rebuilt is mostly gaps: the image is not the program that ran (or not where it ran)."""


def check_walk(ctx: DecodeContext, stats: IngestStats, inputs: Sequence[str | os.PathLike[str]]) -> None:
    """Warn (an error with --strict) when a trace walked through an image says the image is
    wrong: its architecture runs none of the trace's instruction sets, or the walk is mostly gaps.
    Decoders report each gap where it happens; only the whole shows that none will end."""
    path = str(inputs[0]) + (f" (and {len(inputs) - 1} more)" if len(inputs) > 1 else "")
    if ctx.image is not None:
        from .image.arch import mismatch  # the image is loaded: so is its package

        why = mismatch(ctx.image.architecture, stats.isas)
        if why:
            ctx.doubt(path, "image", f"{why}: is --image the program that ran?")
    if "trace_gap" not in stats.event_kinds:
        return
    from .flow.ops import LOSS_NAMES  # loaded already by the decoders that walk

    losses = {name: stats.gaps[name] for name in sorted(LOSS_NAMES & stats.gaps.keys())}
    lost = sum(count for count, _ in losses.values())
    instructions = stats.counts["instructions"]
    if lost and lost * WALK_LOSS_SPACING > instructions:
        _, sample = max(losses.values(), key=lambda loss: loss[0])
        ctx.doubt(
            path, "walk",
            f"the walk through the program image lost its place {lost:,} times in {instructions:,} "
            f"instructions (e.g. {sample}): is --image the program that ran, at its address?",
        )  # fmt: skip


def manifest_of(
    formats: Sequence[str], inputs: list[dict[str, Any]], options: dict[str, Any], stats: IngestStats,
    ctx: DecodeContext, started: float,
) -> dict[str, Any]:  # fmt: skip
    """The manifest of a store of `inputs` decoded with `options` (store/manifest.py checks it)."""
    return {
        "format": formats[0] if len(set(formats)) == 1 else list(formats),
        "inputs": inputs,
        "options": options,
        "counts": stats.counts,
        "time": {"min": stats.time_min, "max": stats.time_max, "unit": ctx.notes.pop("time_unit", None)},
        "cpus": sorted(stats.cpus),
        "isas": sorted(stats.isas),
        "modes": sorted(stats.modes),
        "event_kinds": dict(sorted(stats.event_kinds.items())),
        "warnings": {"count": ctx.warnings, "samples": ctx.warning_samples},
        "notes": ctx.notes,
        "ingest_seconds": round(time.perf_counter() - started, 3),
    }


def default_store_path(inputs: Sequence[str | os.PathLike[str]]) -> Path:
    return Path(str(inputs[0]) + STORE_SUFFIX)


def store_is_current(store: Path, inputs: Sequence[str | os.PathLike[str]]) -> bool:
    """True when `store` was ingested from exactly these inputs, unchanged since."""
    if not is_store(store):
        return False
    try:
        manifest = read_manifest(store)
    except CputraceError:
        return False
    recorded = manifest.get("inputs", [])
    if len(recorded) != len(inputs):
        return False
    for entry, path in zip(recorded, inputs, strict=True):
        fp = Fingerprint.of(path)
        if entry.get("path") != fp.path or entry.get("size") != fp.size:
            return False
        if entry.get("mtime_ns") != fp.mtime_ns and entry.get("xxh3_128") != file_xxh3_128(path):
            return False
    return True



@contextlib.contextmanager
def _write_errors_naming(store: Path) -> Iterator[None]:
    """A full disk (or quota) while the store is written, named: Arrow's errors and a failed
    flush name no file, and the message must say which output could not be written."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno in WRITE_ERRORS:
            raise OSError(exc.errno, os.strerror(exc.errno), str(store)) from exc
        raise


def ingest(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str] | None = None,
    *,
    format: str | None = None,
    strict: bool = False,
    options: Mapping[str, Any] | None = None,
    images: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] = (),
    progress: ProgressHook | None = None,
    on_format: Callable[[str, str], None] | None = None,
    reuse: bool = False,
) -> IngestResult:
    """Decode `inputs` (in order; or one path) into one store; nothing is left behind on failure.

    `options` are decoder options (`cputrace formats` lists each format's), `images` the
    program images (`PATH[@ADDR]`, as `--image` takes them) that decoders of flow-only
    traces walk. The store replaces an existing store at `output` atomically; anything else
    there (or an output holding an input), a `format` no decoder has, an option the inputs'
    formats do not take or a value it cannot take, is refused with UsageError before decoding
    starts."""
    if isinstance(inputs, str | os.PathLike):  # one path, not the characters of one
        inputs = [inputs]
    if not inputs:
        raise CputraceError("no input given")
    store = Path(output) if output is not None else default_store_path(inputs)
    if reuse and store_is_current(store, inputs):
        return IngestResult(store, read_manifest(store), reused=True)
    check_output(store, inputs)
    from .formats import DecodeContext, check_options, get_decoder, sniff  # decoders load when needed

    sources = [InputFile(path, on_read=progress) for path in inputs]
    decoders = [get_decoder(format) if format else sniff(s.head(), s.path) for s in sources]
    given = dict(options or {})
    checked = check_options(given, {decoder.name for decoder in decoders})
    specs = [str(images)] if isinstance(images, (str, os.PathLike)) else [str(spec) for spec in images]
    ctx = DecodeContext(strict=strict, options=checked)
    if specs:
        from .image import load_image_specs  # ELF, DWARF and capstone: only when asked for

        ctx.image = load_image_specs(specs)
    stats = IngestStats()
    started = time.perf_counter()
    with _write_errors_naming(store):
        writer = StoreWriter(store)
        writes = BackgroundWrites(writer, stats)
        formats_used = []
        recorded_inputs = []
        try:
            for source, decoder in zip(sources, decoders, strict=True):
                if on_format:
                    on_format(source.path, decoder.name)
                formats_used.append(decoder.name)
                seq_base = stats.counts["instructions"]
                for batch in decoder.decode(source, ctx):
                    for table, data in batch.items():
                        if seq_base and data.num_rows:
                            index = data.schema.get_field_index("seq")
                            shifted = pc.add(data.column("seq"), pa.scalar(seq_base))
                            data = data.set_column(index, "seq", shifted)
                        writes.submit(table, data)
                writes.drain()
                fp = source.fingerprint
                recorded_inputs.append(
                    {
                        "path": fp.path,
                        "size": fp.size,
                        "mtime_ns": fp.mtime_ns,
                        "xxh3_128": source.content_hash(),
                        "compression": source.compression,
                        "format": decoder.name,
                        "first_seq": seq_base,
                        "instructions": stats.counts["instructions"] - seq_base,
                    }
                )
            check_walk(ctx, stats, inputs)
            options_used = {"strict": strict, **({"images": specs} if specs else {}), **given}
            manifest = manifest_of(formats_used, recorded_inputs, options_used, stats, ctx, started)
            path = writer.commit(manifest)
        except BaseException:
            writes.close()
            writer.abort()
            raise
        writes.close()
        return IngestResult(path, manifest)
